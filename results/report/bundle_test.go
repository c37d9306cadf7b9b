package report

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/results"
)

const fakeKey = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBogusBogusBogus\n-----END EC PRIVATE KEY-----\n"

// untar returns the files of a gzipped tar archive.
func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(tr)
		out[h.Name] = string(c)
	}
}

// A bundle of a real run directory holds its reports, summary, series and histograms, and how to re-run
// it; never the TLS keys a --tls run keeps in its directory, nor the value of a secret flag; with Redact,
// not the endpoints either. A bundled file holding key material fails the bundle.
func TestBundleHoldsNoKeyMaterial(t *testing.T) {
	dir := fixtureRun(t)
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	Prepare(r, nil)
	if err := Write(r); err != nil {
		t.Fatal(err)
	}
	endpoint := "127.0.0.1:23790"
	r.Summary.Cluster.Endpoints = []string{"https://" + endpoint}
	r.Summary.Command = []string{"chaosbench", "run", "--endpoints", endpoint, "--auth-password", "hunter2", "--token=s3cr3t-t0ken"}
	if err := results.WriteSummary(dir, r.Summary); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, MarkdownFile), []byte("# report\nendpoints: https://"+endpoint+"\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "tls"), 0o755)
	for _, f := range []string{"tls/server.key", "tls/client.key", "client.key", "ca.pem", "token"} {
		os.WriteFile(filepath.Join(dir, f), []byte(fakeKey), 0o600)
	}

	var buf bytes.Buffer
	if err := WriteBundle(&buf, []string{dir}, BundleOptions{Redact: true}); err != nil {
		t.Fatal(err)
	}
	files := untar(t, buf.Bytes())
	base := filepath.Base(dir)
	for _, want := range []string{"README.txt", base + "/summary.json", base + "/report.html", base + "/report.md", base + "/latency.hlog"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the bundle lacks %s (it holds %d files)", want, len(files))
		}
	}
	for name, content := range files {
		for _, bad := range []string{"PRIVATE KEY", "hunter2", "s3cr3t-t0ken", endpoint} {
			if strings.Contains(content, bad) {
				t.Errorf("%s holds %q", name, bad)
			}
		}
		if strings.HasSuffix(name, ".key") || strings.HasSuffix(name, ".pem") || strings.Contains(name, "tls/") {
			t.Errorf("the bundle holds %s", name)
		}
	}
	if !strings.Contains(files["README.txt"], "re-run with") || !strings.Contains(files[base+"/report.md"], "endpoint-1") {
		t.Errorf("README:\n%s\nreport.md:\n%s", files["README.txt"], files[base+"/report.md"])
	}

	// Key material in a file that is bundled fails the bundle.
	os.WriteFile(filepath.Join(dir, "check.json"), []byte(fakeKey), 0o644)
	if err := WriteBundle(io.Discard, []string{dir}, BundleOptions{}); err == nil || !strings.Contains(err.Error(), "key material") {
		t.Fatalf("a bundled key: %v", err)
	}
}
