package chaosbench

import "testing"

// TestApiserverOpName: the emulation's operations are named as the apiservers' etcd request metrics name
// theirs, so that the fidelity table sets each against its real counterpart.
func TestApiserverOpName(t *testing.T) {
	for op, want := range map[string]string{
		"update/minions":          "update/nodes",
		"get/masterleases":        "get/apiServerIPInfo",
		"list/masterleases":       "list/apiServerIPInfo",
		"update/peerserverleases": "update/apiServerPeerIPInfo",
		"current-rv/pods":         "getCurrentResourceVersion/pods",
		"delete/pods":             "delete/pods",
		"compact":                 "compact",
		"count/events":            "listWithCount/events",
	} {
		if got := apiserverOpName(op); got != want {
			t.Errorf("%s: named %s, want %s", op, got, want)
		}
	}
}
