package slowfs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
)

func TestMain(m *testing.M) {
	RunIfRequested()
	os.Exit(m.Run())
}

func mountForTest(t *testing.T, track bool) *FS {
	t.Helper()
	if err := Available(); err != nil {
		testenv.Missing(t, testenv.FUSE, "slowfs needs FUSE: %v", err)
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

// walOnMount mounts a slowfs without unsynced-write tracking and creates a file "wal" on it, closed at the
// test's end.
func walOnMount(t *testing.T) (*FS, *os.File) {
	t.Helper()
	f := mountForTest(t, false)
	file, err := os.Create(filepath.Join(f.Mountpoint(), "wal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	return f, file
}

// TestFsyncDelay: an fsync through the mount takes at least the delay set, and no longer once healed.
func TestFsyncDelay(t *testing.T) {
	f, file := walOnMount(t)
	ctx := context.Background()
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

// TestWipeAndRecreate: a member replacement wipes the data directory through the mount and creates files
// under the same names again; writes to the new files must go through, with unsynced-write tracking on.
func TestWipeAndRecreate(t *testing.T) {
	f := mountForTest(t, true)
	write := func(rel string, data string) {
		t.Helper()
		p := filepath.Join(f.Mountpoint(), rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		file, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		if _, err := file.WriteAt([]byte(data), 0); err != nil {
			t.Fatalf("write %s: %v", rel, err)
		}
		if err := file.Sync(); err != nil {
			t.Fatal(err)
		}
		if _, err := file.WriteAt([]byte(data), int64(len(data))); err != nil {
			t.Fatalf("unsynced write %s: %v", rel, err)
		}
	}
	for round := range 3 {
		write("member/snap/db", "bolt")
		write("member/wal/0.wal", "wal")
		os.MkdirAll(filepath.Join(f.Mountpoint(), "member/wal/tmp"), 0o700)
		entries, _ := os.ReadDir(f.Mountpoint())
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(f.Mountpoint(), e.Name())); err != nil {
				t.Fatalf("round %d: wipe: %v", round, err)
			}
		}
	}
	write("member/snap/db", "bolt")
	if _, err := f.Crash(context.Background()); err != nil {
		t.Fatalf("crash after wipes: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(f.Mountpoint(), "member/snap/db")); err != nil || string(b) != "bolt" {
		t.Fatalf("after crash: %q, %v", b, err)
	}
}

// TestWriteToReplacedFile: etcd renames a received snapshot over its open database; writes to the file
// that was renamed over (and to an unlinked one) must still work with unsynced-write tracking on, and a
// crash must restore the file that now has the name.
func TestWriteToReplacedFile(t *testing.T) {
	f := mountForTest(t, true)
	db := filepath.Join(f.Mountpoint(), "db")
	old, err := os.OpenFile(db, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	old.WriteAt([]byte("old"), 0)
	old.Sync()
	incoming := filepath.Join(f.Mountpoint(), "incoming.snap.db")
	if err := os.WriteFile(incoming, []byte("new database"), 0o600); err != nil {
		t.Fatal(err)
	}
	nf, _ := os.OpenFile(incoming, os.O_RDWR, 0)
	nf.Sync()
	nf.Close()
	if err := os.Rename(incoming, db); err != nil {
		t.Fatal(err)
	}
	if _, err := old.WriteAt([]byte("write to the replaced file"), 0); err != nil {
		t.Fatalf("write to a file renamed over: %v", err)
	}
	gone, _ := os.Create(filepath.Join(f.Mountpoint(), "gone"))
	defer gone.Close()
	os.Remove(gone.Name())
	if _, err := gone.Write([]byte("write to an unlinked file")); err != nil {
		t.Fatalf("write to an unlinked file: %v", err)
	}
	cur, _ := os.OpenFile(db, os.O_RDWR, 0)
	cur.WriteAt([]byte("unsynced"), 0)
	cur.Close()
	if _, err := f.Crash(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(db); string(b) != "new database" {
		t.Fatalf("after crash db holds %q, want the synced snapshot", b)
	}
}

// TestDelaysHoldThroughSignals: a signal to the thread blocked on the mount makes the kernel send FUSE an
// interrupt (Go's runtime sends its threads SIGURG to preempt them); a slow disk does not get faster for it,
// so the delay must hold: fsync and write still take the whole delay when their thread is signalled.
func TestDelaysHoldThroughSignals(t *testing.T) {
	f, file := walOnMount(t)
	ctx := context.Background()
	const delay = 400 * time.Millisecond
	if err := f.Set(ctx, Delays{Fsync: delay, Write: delay}); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"write", func() error { _, err := file.Write([]byte("record")); return err }},
		{"fsync", file.Sync},
	} {
		tid := make(chan int, 1)
		took := make(chan time.Duration, 1)
		go func() {
			runtime.LockOSThread() // the thread signalled is the one blocked in the system call
			defer runtime.UnlockOSThread()
			tid <- syscall.Gettid()
			start := time.Now()
			if err := op.do(); err != nil {
				t.Errorf("%s: %v", op.name, err)
			}
			took <- time.Since(start)
		}()
		target := <-tid
		for range 5 {
			time.Sleep(40 * time.Millisecond)
			if err := syscall.Tgkill(os.Getpid(), target, syscall.SIGURG); err != nil {
				t.Fatal(err)
			}
		}
		if d := <-took; d < delay {
			t.Fatalf("%s took %v with a %v delay and its thread signalled: the signal cut the delay short", op.name, d, delay)
		}
	}
}

// TestHealEndsDelaysInProgress: healing the disk releases the fsyncs already waiting, as a disk that
// recovers finishes the writes queued on it.
func TestHealEndsDelaysInProgress(t *testing.T) {
	f, file := walOnMount(t)
	ctx := context.Background()
	if err := f.Set(ctx, Delays{Fsync: time.Minute}); err != nil {
		t.Fatal(err)
	}
	took := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		if err := file.Sync(); err != nil {
			t.Errorf("fsync: %v", err)
		}
		took <- time.Since(start)
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case d := <-took:
		t.Fatalf("fsync returned after %v with a one-minute delay", d)
	default:
	}
	if err := f.Set(ctx, Delays{}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-took:
		if d < 300*time.Millisecond {
			t.Fatalf("fsync took %v, before the heal", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fsync still waiting 10s after the heal")
	}
}
