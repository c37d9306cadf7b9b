package clusters

import (
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

func TestParseEtcdFlags(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		want    []EtcdFlag
		wantErr string
	}{
		{name: "none"},
		{name: "ints", specs: []string{"heartbeat-interval=100", "--snapshot-count=10000"},
			want: []EtcdFlag{{"heartbeat-interval", "100"}, {"snapshot-count", "10000"}}},
		{name: "duration", specs: []string{"watch-progress-notify-interval=5s"}, want: []EtcdFlag{{"watch-progress-notify-interval", "5s"}}},
		{name: "bare bool", specs: []string{"experimental-initial-corrupt-check"}, want: []EtcdFlag{{"experimental-initial-corrupt-check", "true"}}},
		{name: "feature gates", specs: []string{"feature-gates=InitialCorruptCheck=true"}, want: []EtcdFlag{{"feature-gates", "InitialCorruptCheck=true"}}},
		{name: "unknown with suggestion", specs: []string{"heartbeat-intervall=100"}, wantErr: "did you mean heartbeat-interval"},
		{name: "unknown", specs: []string{"frobnicate=1"}, wantErr: "etcd has no such flag"},
		{name: "bad value", specs: []string{"heartbeat-interval=fast"}, wantErr: "heartbeat-interval=fast"},
		{name: "managed", specs: []string{"data-dir=/tmp/x"}, wantErr: "chaosbench sets this flag itself"},
		{name: "managed tls", specs: []string{"cert-file=/x.pem"}, wantErr: "chaosbench sets this flag itself"},
		{name: "value required", specs: []string{"snapshot-count"}, wantErr: "expected snapshot-count=value"},
		{name: "empty", specs: []string{"=3"}, wantErr: "expected name=value"},
		{name: "conflicting", specs: []string{"heartbeat-interval=100", "election-timeout=300"}, wantErr: "etcd rejects these settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEtcdFlags(tt.specs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if !outcome.IsUsage(err) {
					t.Fatalf("error %v is not a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("flag %d: got %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
