package clusters

import (
	"slices"
	"strings"
	"testing"
)

func TestParseEndpoints(t *testing.T) {
	for _, tt := range []struct {
		name      string
		endpoints []string
		tls       bool
		want      []string
	}{
		{"host:port is plain http", []string{"127.0.0.1:2379"}, false, []string{"http://127.0.0.1:2379"}},
		{"host:port with TLS files is https", []string{"127.0.0.1:2379"}, true, []string{"https://127.0.0.1:2379"}},
		{"host name", []string{"etcd-0.etcd:2379"}, false, []string{"http://etcd-0.etcd:2379"}},
		{"IPv6 in brackets", []string{"[::1]:2379"}, false, []string{"http://[::1]:2379"}},
		{"http URL", []string{"http://10.0.0.1:2379"}, false, []string{"http://10.0.0.1:2379"}},
		{"https URL", []string{"https://10.0.0.1:2379"}, true, []string{"https://10.0.0.1:2379"}},
		{"https URL without TLS files", []string{"https://10.0.0.1:2379"}, false, []string{"https://10.0.0.1:2379"}},
		{"explicit http wins over TLS files", []string{"http://10.0.0.1:2379"}, true, []string{"http://10.0.0.1:2379"}},
		{"trailing slash", []string{"http://10.0.0.1:2379/"}, false, []string{"http://10.0.0.1:2379"}},
		{"scheme in capitals", []string{"HTTP://10.0.0.1:2379"}, false, []string{"http://10.0.0.1:2379"}},
		{"comma-separated", []string{"127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379"}, false,
			[]string{"http://127.0.0.1:2379", "http://127.0.0.1:22379", "http://127.0.0.1:32379"}},
		{"comma-separated with spaces", []string{"a:1, b:2"}, false, []string{"http://a:1", "http://b:2"}},
		{"several entries and lists", []string{"a:1", "http://b:2,c:3"}, false, []string{"http://a:1", "http://b:2", "http://c:3"}},
		{"unix socket, absolute", []string{"unix:///run/etcd.sock"}, false, []string{"unix:///run/etcd.sock"}},
		{"unix socket, relative", []string{"unix://localhost:2379"}, false, []string{"unix://localhost:2379"}},
		{"unixs socket", []string{"unixs:///run/etcd.sock"}, true, []string{"unixs:///run/etcd.sock"}},
		{"unix beside http", []string{"unix:///run/etcd.sock,127.0.0.1:2379"}, false, []string{"unix:///run/etcd.sock", "http://127.0.0.1:2379"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEndpoints(tt.endpoints, tt.tls)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("ParseEndpoints(%q, %v) = %q, %v; want %q", tt.endpoints, tt.tls, got, err, tt.want)
			}
			// What ParseEndpoints returns reads back as itself: run directories and scenarios can store it.
			again, err := ParseEndpoints(got, tt.tls)
			if err != nil || !slices.Equal(again, got) {
				t.Fatalf("second pass: %q, %v", again, err)
			}
		})
	}
}

func TestParseEndpointsRefuses(t *testing.T) {
	for _, tt := range []struct {
		name      string
		endpoints []string
		tls       bool
		want      string
	}{
		{"empty", []string{""}, false, "empty endpoint"},
		{"blank", []string{"  "}, false, "empty endpoint"},
		{"empty in a list", []string{"a:1,,b:2"}, false, `"a:1,,b:2": empty endpoint in the list`},
		{"trailing comma", []string{"a:1,"}, false, "empty endpoint in the list"},
		{"empty entry as the flag splits it", []string{"a:1", "", "b:2"}, false, `"a:1,,b:2": empty endpoint in the list`},
		{"no port", []string{"localhost"}, false, `"localhost": no port`},
		{"URL without port", []string{"http://localhost"}, false, `"http://localhost": no port`},
		{"empty port", []string{"localhost:"}, false, `port "": expected a number`},
		{"no host", []string{":2379"}, false, `":2379": no host`},
		{"URL without host", []string{"http://:2379"}, false, "no host"},
		{"nothing after scheme", []string{"http://"}, false, "no port"},
		{"port not a number", []string{"127.0.0.1:http"}, false, `port "http": expected a number from 1 to 65535`},
		{"port with junk", []string{"127.0.0.1:2379abc"}, false, `port "2379abc"`},
		{"port zero", []string{"127.0.0.1:0"}, false, `port "0"`},
		{"port too large", []string{"https://127.0.0.1:70000"}, false, `port "70000"`},
		{"IPv6 without brackets", []string{"::1:2379"}, false, "IPv6 addresses go in brackets"},
		{"unknown scheme", []string{"ftp://127.0.0.1:2379"}, false, `unknown scheme "ftp"`},
		{"grpc scheme", []string{"grpc://127.0.0.1:2379"}, false, `unknown scheme "grpc"`},
		{"no scheme before ://", []string{"://127.0.0.1:2379"}, false, "no scheme"},
		{"path", []string{"http://127.0.0.1:2379/v3/kv"}, false, `unexpected "/v3/kv"`},
		{"user", []string{"http://root@127.0.0.1:2379"}, false, `unexpected "@127.0.0.1:2379"`},
		{"query", []string{"http://127.0.0.1:2379?x=1"}, false, `unexpected "?x=1"`},
		{"space in host", []string{"my host:2379"}, false, `host "my host"`},
		{"unix without path", []string{"unix://"}, false, "no socket path"},
		{"unix without slashes", []string{"unix:/run/etcd.sock"}, false, "write a socket as unix://path"},
		{"garbage in a list", []string{"127.0.0.1:2379,bogus"}, false, `"bogus": no port`},
		{"garbage entry after a good one", []string{"127.0.0.1:2379", "http//x:1"}, false, `"http//x:1": host "http//x": not a host name`},
		{"plaintext and TLS mixed", []string{"http://a:1,https://b:2"}, false, `"http://a:1" and "https://b:2": one list cannot mix plaintext and TLS`},
		{"TLS files and explicit http", []string{"a:1,http://b:2"}, true, "cannot mix plaintext and TLS"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEndpoints(tt.endpoints, tt.tls)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseEndpoints(%q) = %q, %v; want one line containing %q", tt.endpoints, got, err, tt.want)
			}
		})
	}
}
