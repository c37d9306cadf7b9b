package clusters

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"go.etcd.io/etcd/server/v3/embed"
)

// startInProcessMember starts a one-member etcd in the test process that listens for clients on an http
// port and on the sockets (unix:// URLs). It advertises the http one, as a real deployment would, or only
// the sockets when advertiseSockets is set. It returns the http port's host:port; the member stops with
// the test.
func startInProcessMember(t *testing.T, advertiseSockets bool, sockets ...string) string {
	t.Helper()
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	cfg := embed.NewConfig()
	cfg.Name = "m1"
	cfg.Dir = filepath.Join(dir, "m1.etcd")
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "m1.log")}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	if advertiseSockets {
		cfg.AdvertiseClientUrls = nil
	}
	for _, raw := range sockets {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ListenClientUrls = append(cfg.ListenClientUrls, *u)
		if advertiseSockets {
			cfg.AdvertiseClientUrls = append(cfg.AdvertiseClientUrls, *u)
		}
	}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = "m1=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		t.Fatal("etcd not ready within 20 s")
	}
	return client.Host
}

// TestExternalEndpointForms connects to one real member through each form etcdctl accepts: the load's
// client dials what the user gave (normalised), while health and status probes go to the member's
// advertised http URL.
func TestExternalEndpointForms(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "etcd.sock")
	hostPort := startInProcessMember(t, false, "unix://"+sock)
	_, files, err := GenerateTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		endpoints []string
		tlsFiles  bool
		want      string
	}{
		{"host:port", []string{hostPort}, false, "http://" + hostPort},
		{"http URL", []string{"http://" + hostPort}, false, "http://" + hostPort},
		{"http URL with TLS files", []string{"http://" + hostPort}, true, "http://" + hostPort},
		{"list with a dead endpoint", []string{"127.0.0.1:1," + hostPort}, false, "http://127.0.0.1:1"},
		{"unix socket", []string{"unix://" + sock}, false, "unix://" + sock},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			opts := ExternalOptions{Endpoints: tt.endpoints}
			if tt.tlsFiles {
				opts.CACert, opts.Cert, opts.Key = files.CA, files.Cert, files.Key
			}
			ext, err := ConnectExternal(ctx, opts)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer ext.Close(ctx)
			if got := ext.Endpoints(); got[0] != tt.want {
				t.Fatalf("endpoints %q, want %q first", got, tt.want)
			}
			if ext.TLS() != nil {
				t.Fatal("TLS configured for plaintext endpoints: the probes would not reach the member")
			}
			if l, err := ext.Leader(ctx); err != nil || l.Name() != "m1" {
				t.Fatalf("leader %v, %v", l, err)
			}
			if len(ext.Members()) != 1 || ext.Members()[0].ClientURL() != "http://"+hostPort {
				t.Fatalf("members %v", ext.Members())
			}
			if err := ext.WaitHealthy(ctx); err != nil {
				t.Fatal(err)
			}
			cli := newClient(t, ext)
			if _, err := cli.Put(ctx, "form", tt.name); err != nil {
				t.Fatal(err)
			}
			// Status by endpoint is how a run asks for etcd's version.
			if _, err := cli.Status(ctx, ext.Endpoints()[len(ext.Endpoints())-1]); err != nil {
				t.Fatalf("status of %s: %v", ext.Endpoints()[len(ext.Endpoints())-1], err)
			}
		})
	}
}

// TestExternalMemberOnlyOnSocket: a member that advertises no http(s) client URL cannot be probed; that is
// one clear usage error at connect time, not a health timeout later.
func TestExternalMemberOnlyOnSocket(t *testing.T) {
	// etcd wants advertised URLs as host:port, so the socket is etcd's "unix://localhost:PORT", a file of
	// that name in the working directory.
	t.Chdir(t.TempDir())
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	sock := fmt.Sprintf("unix://localhost:%d", ports[0])
	startInProcessMember(t, true, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = ConnectExternal(ctx, ExternalOptions{Endpoints: []string{sock}})
	if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), "member m1 advertises no http(s) client URL ("+sock+")") {
		t.Fatalf("connect: %v, want a usage error about the advertised URL", err)
	}
}
