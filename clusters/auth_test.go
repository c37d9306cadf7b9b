package clusters

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

func TestParseUser(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := file("pw", "s3cret\nignored\n")
	crlf := file("crlf", "s3cret\r\n")
	empty := file("empty", "\nsecond\n")
	for _, tt := range []struct {
		name, user, file string
		want             Credentials
		err              string // "" for none; else a usage error containing it
	}{
		{"password in user", "alice:s3cret", "", Credentials{"alice", "s3cret"}, ""},
		{"password with a colon", "alice:a:b", "", Credentials{"alice", "a:b"}, ""},
		{"password from the file, first line", "alice", pw, Credentials{"alice", "s3cret"}, ""},
		{"a CRLF file", "alice", crlf, Credentials{"alice", "s3cret"}, ""},
		{"no password at all", "alice", "", Credentials{}, "--user alice: no password"},
		{"empty password after the colon", "alice:", "", Credentials{}, "the password after the colon is empty"},
		{"both", "alice:s3cret", pw, Credentials{}, "give one"},
		{"no name", ":s3cret", "", Credentials{}, "no user name"},
		{"missing file", "alice", filepath.Join(dir, "nope"), Credentials{}, "--password-file"},
		{"empty first line", "alice", empty, Credentials{}, "empty first line"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUser(tt.user, tt.file)
			if tt.err == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseUser(%q, %q) = %+v, %v; want %+v", tt.user, tt.file, got, err, tt.want)
				}
				return
			}
			if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("ParseUser(%q, %q) = %+v, %v; want a usage error containing %q", tt.user, tt.file, got, err, tt.err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// TestEnableAuth turns authentication on in a real cluster and checks who may do what afterwards: the
// load user reads and writes every key but is not root (it may not defragment), the harness's clients
// log in as root (a member hash, which needs root, is taken), nobody may read without logging in, and an
// external cluster is reached with --user's credentials only, refused ones a usage error before
// anything starts.
func TestEnableAuth(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, err := EnableAuth(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if AuthOf(c) == nil || a.Admin.User != "root" || a.Load.User != LoadUser || a.Load.Password == "" || a.Admin.Password == a.Load.Password {
		t.Fatalf("auth %+v", AuthOf(c))
	}

	// etcd's /health, which WaitHealthy reads, must still say healthy to a caller without a login.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatalf("health with auth on: %v", err)
	}

	load := newLoadClient(t, c)
	if _, err := load.Put(ctx, "/any/key", "v"); err != nil {
		t.Fatalf("the load user writes: %v", err)
	}
	if r, err := load.Get(ctx, "/any/key"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the load user reads: %v, %v", r, err)
	}
	if _, err := load.Defragment(ctx, c.Members()[0].ClientURL()); !errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) {
		t.Fatalf("the load user defragments: %v, want permission denied (it must not be root)", err)
	}
	admin := newClient(t, c)
	if _, err := admin.Defragment(ctx, c.Members()[0].ClientURL()); err != nil {
		t.Fatalf("root defragments: %v", err)
	}

	cfg := clientConfig(c)
	cfg.Logger = zap.NewNop()
	anon, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.Get(ctx, "/any/key"); !errors.Is(rpctypes.Error(err), rpctypes.ErrUserEmpty) {
		t.Fatalf("a read without logging in: %v, want %v", err, rpctypes.ErrUserEmpty)
	}

	if h := CompareHashes(ctx, c, HashOptions{Converge: 10 * time.Second}); h.Agreement != Agree {
		t.Fatalf("members' hashes with auth on: %+v", h)
	}

	ext, err := ConnectExternal(ctx, ExternalOptions{Endpoints: c.Endpoints(), User: &a.Load})
	if err != nil {
		t.Fatalf("connect as the load user: %v", err)
	}
	defer ext.Close(ctx)
	if _, err := newLoadClient(t, ext).Put(ctx, "/external", "v"); err != nil {
		t.Fatalf("write through the external cluster: %v", err)
	}
	for _, tt := range []struct {
		name string
		user *Credentials
		want string
	}{
		{"wrong password", &Credentials{User: LoadUser, Password: "wrong"}, "--user " + LoadUser + ": etcd at"},
		{"unknown user", &Credentials{User: "nobody", Password: "x"}, "--user nobody: etcd at"},
		{"no user", nil, "has authentication enabled: give --user"},
	} {
		_, err := ConnectExternal(ctx, ExternalOptions{Endpoints: c.Endpoints(), User: tt.user, ConnectTimeout: 5 * time.Second})
		if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: ConnectExternal = %v; want one line, a usage error containing %q", tt.name, err, tt.want)
		}
	}
}

// newLoadClient is newClient logged in as the load's user.
func newLoadClient(t *testing.T, c Cluster) *clientv3.Client {
	t.Helper()
	cfg := LoadClientConfig(c)
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
