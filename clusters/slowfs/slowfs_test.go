package slowfs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	RunIfRequested()
	os.Exit(m.Run())
}

func mountForTest(t *testing.T, track bool) *FS {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("slowfs needs FUSE: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := Mount(ctx, Options{Lower: filepath.Join(dir, "lower"), Mountpoint: filepath.Join(dir, "mnt"),
		Seed: 1, TrackUnsynced: track, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		if Mounted(f.Mountpoint()) {
			t.Errorf("%s still mounted after Close", f.Mountpoint())
		}
	})
	if !Mounted(f.Mountpoint()) {
		t.Fatalf("%s is not a mount point", f.Mountpoint())
	}
	return f
}

// TestFsyncDelay: an fsync through the mount takes at least the delay set, and no longer once healed.
func TestFsyncDelay(t *testing.T) {
	f := mountForTest(t, false)
	ctx := context.Background()
	file, err := os.Create(filepath.Join(f.Mountpoint(), "wal"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	fsync := func() time.Duration {
		if _, err := file.Write([]byte("record")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := file.Sync(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if err := f.Set(ctx, Delays{Fsync: 100 * time.Millisecond, FsyncJitter: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d := fsync(); d < 100*time.Millisecond {
			t.Fatalf("fsync took %v with a 100ms delay", d)
		}
	}
	if err := f.Set(ctx, Delays{}); err != nil {
		t.Fatal(err)
	}
	if d := fsync(); d > 80*time.Millisecond {
		t.Fatalf("fsync took %v after the delay was removed", d)
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fsyncs < 4 || st.DelayedFsyncs != 3 {
		t.Fatalf("stats %+v, want at least 4 fsyncs of which 3 delayed", st)
	}
	// The data is really in the backing directory.
	if b, err := os.ReadFile(filepath.Join(f.Lower(), "wal")); err != nil || string(b) != "recordrecordrecordrecord" {
		t.Fatalf("backing file %q, %v", b, err)
	}
}

// TestCrashDropsUnsyncedWrites: after a crash a file holds exactly what its last fsync made durable:
// overwritten ranges come back, appended bytes and size go away, a truncated tail returns.
func TestCrashDropsUnsyncedWrites(t *testing.T) {
	f := mountForTest(t, true)
	ctx := context.Background()
	path := filepath.Join(f.Mountpoint(), "data")
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	synced := bytes.Repeat([]byte("s"), 10000)
	file.Write(synced)
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
	file.WriteAt([]byte("OVERWRITTEN"), 100)
	file.WriteAt(bytes.Repeat([]byte("a"), 5000), 10000) // append
	file.Truncate(12000)
	file.Close()
	other := filepath.Join(f.Mountpoint(), "other")
	os.WriteFile(other, []byte("never synced"), 0o600)
	st, _ := f.Stats(ctx)
	if st.UnsyncedBytes == 0 {
		t.Fatalf("stats %+v: no unsynced bytes tracked", st)
	}

	rep, err := f.Crash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 2 {
		t.Fatalf("crash report %+v, want 2 files", rep)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, synced) {
		t.Fatalf("after crash the file has %d bytes (%q...), want the %d synced bytes", len(got), got[:20], len(synced))
	}
	if b, err := os.ReadFile(other); err != nil || len(b) != 0 {
		t.Fatalf("a never-synced file holds %q after a crash (%v), want it empty", b, err)
	}

	// Synced data survives a crash.
	os.WriteFile(path, []byte("durable"), 0o600)
	file, _ = os.OpenFile(path, os.O_WRONLY, 0)
	file.Sync()
	file.Close()
	if _, err := f.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "durable" {
		t.Fatalf("fsynced contents lost in a crash: %q", b)
	}
}

func TestCrashNeedsTracking(t *testing.T) {
	f := mountForTest(t, false)
	if _, err := f.Crash(context.Background()); err == nil {
		t.Fatal("crash without tracking succeeded")
	}
}
