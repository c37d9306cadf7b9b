package results

import (
	"encoding/json"
	"runtime"
	"testing"
)

// This machine's environment names the run directory's mount, and the Machine line holds the hardware.
func TestCollectEnvironmentDisk(t *testing.T) {
	env := CollectEnvironment(t.TempDir())
	b, _ := json.Marshal(env)
	t.Logf("%s", b)
	t.Logf("machine: %s", env.Machine())
	if len(env.Facts()) < 3 {
		t.Errorf("facts: %v", env.Facts())
	}
	if runtime.GOOS != "linux" {
		return
	}
	if env.RunDirDisk == nil || env.RunDirDisk.MountPoint == "" || env.RunDirDisk.FileSystem == "" || len(env.RunDirDisk.MountOptions) == 0 {
		t.Fatalf("run directory disk: %+v", env.RunDirDisk)
	}
}

func TestParseMountInfo(t *testing.T) {
	d, ok := parseMountInfo(`36 35 98:0 /mnt1 /mnt\0402 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`)
	if !ok || d.MountPoint != "/mnt 2" || d.FileSystem != "ext3" || d.Device != "/dev/root" ||
		len(d.MountOptions) != 3 || d.MountOptions[1] != "noatime" || d.MountOptions[2] != "errors=continue" {
		t.Fatalf("%+v", d)
	}
	if !within("/mnt 2/x", "/mnt 2") || within("/mnt 20", "/mnt 2") || !within("/a", "/") {
		t.Fatal("within")
	}
}
