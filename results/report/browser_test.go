package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/trend"
)

// chromium returns a headless-capable Chromium, and skips the test with the reason where there is none
// (.ci/run installs Debian's chromium package; a test never installs anything itself).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, testenv.Chromium, "no Chromium found: install Debian's chromium package (.ci/run does) to check the pages in a browser")
	return ""
}

// pageCheck is what a headless Chromium saw of a page.
type pageCheck struct {
	dom, console        string
	rendered, jsErrors  string
	charts, chartsDrawn int
}

func openPage(t *testing.T, browser, path string) pageCheck {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, append(browserFlags(), "--dump-dom", "file://"+path)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	pc := pageCheck{dom: string(dom), console: stderr.String()}
	get := func(name string) string {
		if m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(pc.dom); m != nil {
			return m[1]
		}
		return ""
	}
	pc.rendered, pc.jsErrors = get("data-rendered"), get("data-js-errors")
	pc.charts, _ = strconv.Atoi(get("data-charts"))
	pc.chartsDrawn, _ = strconv.Atoi(get("data-charts-drawn"))
	return pc
}

func browserFlags() []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--hide-scrollbars", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"}
}

// problems lists what is wrong with a page: script errors (caught by the page itself or printed on the
// console), a script that did not run to its end, charts that were not laid out.
func (pc pageCheck) problems(minCharts int) []string {
	var out []string
	if pc.rendered != "true" {
		out = append(out, "the page's script did not run to its end")
	}
	if pc.jsErrors != "" {
		out = append(out, pc.jsErrors+" script errors on the page")
	}
	for _, line := range strings.Split(pc.console, "\n") {
		if strings.Contains(line, "CONSOLE") && (strings.Contains(line, "Uncaught") || strings.Contains(line, "Error")) {
			out = append(out, "console: "+line)
		}
	}
	if pc.charts < minCharts || pc.chartsDrawn != pc.charts {
		out = append(out, fmt.Sprintf("%d charts drawn of %d, want at least %d", pc.chartsDrawn, pc.charts, minCharts))
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="https?://[^"]*"`).FindAllString(pc.dom, -1) {
		out = append(out, "the page fetches "+m+": it must open offline")
	}
	return out
}

// TestReportOpensInChromium renders the report of a real run with faults, opens it in headless Chromium
// from the file system (no network), and checks that every chart was drawn and that no script failed. It
// saves a screenshot next to the report (and into $CHAOSBENCH_ARTIFACTS when set). The same check must
// fail on a page with a broken script.
func TestReportOpensInChromium(t *testing.T) {
	browser := chromium(t)
	r := loadFixture(t)
	if err := Write(r); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r.Dir, HTMLFile)
	pc := openPage(t, browser, path)
	for _, p := range pc.problems(10) {
		t.Error(p)
	}
	for _, want := range []string{"slowdisk m1", "pause m3", "WAL fsync p99 per second", "Percentile distribution", "etcd-hardware"} {
		if !strings.Contains(pc.dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}

	t.Run("comparison page", func(t *testing.T) {
		out := t.TempDir()
		if _, err := RenderComparison(out, []Labelled{{Dir: r.Dir, Label: "a"}, {Dir: r.Dir, Label: "b"}}, compare.Options{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range openPage(t, browser, filepath.Join(out, ComparisonHTMLFile)).problems(2) {
			t.Error(p)
		}
	})

	t.Run("trend page", func(t *testing.T) {
		// Six nights of the same run: a trend page with its two charts per scenario.
		var dirs []string
		for i := range 6 {
			d := filepath.Join(t.TempDir(), fmt.Sprintf("night-%d", i))
			os.MkdirAll(d, 0o755)
			s := *r.Summary
			s.Start = s.Start.Add(time.Duration(i) * 24 * time.Hour)
			if err := results.WriteSummary(d, &s); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, d)
		}
		tr, err := trend.Read(dirs, trend.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		if err := WriteTrend(out, tr); err != nil {
			t.Fatal(err)
		}
		for _, p := range openPage(t, browser, filepath.Join(out, TrendHTMLFile)).problems(2) {
			t.Error(p)
		}
	})

	t.Run("bundle", func(t *testing.T) {
		// The bundle's copy of the report opens offline as the original does: unpack it and open it.
		var buf bytes.Buffer
		if err := WriteBundle(&buf, []string{r.Dir}, BundleOptions{Redact: true}); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		for name, content := range untar(t, buf.Bytes()) {
			p := filepath.Join(out, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range openPage(t, browser, filepath.Join(out, filepath.Base(r.Dir), HTMLFile)).problems(10) {
			t.Error(p)
		}
	})

	t.Run("a broken page fails the check", func(t *testing.T) {
		b, _ := os.ReadFile(path)
		broken := strings.Replace(string(b), "</main>", "</main><script>notDefinedAnywhere();</script>", 1)
		bad := filepath.Join(r.Dir, "broken.html")
		os.WriteFile(bad, []byte(broken), 0o644)
		if p := openPage(t, browser, bad).problems(10); len(p) == 0 {
			t.Fatal("a page with a failing script passed the check")
		}
	})

	shot := filepath.Join(r.Dir, "report.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, append(browserFlags(), "--window-size=1400,3600", "--screenshot="+shot, "file://"+path)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("screenshot: %v\n%s", err, out)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 50_000 {
		t.Fatalf("screenshot %s: %v (a blank page is small)", shot, err)
	}
	if dir := os.Getenv("CHAOSBENCH_ARTIFACTS"); dir != "" {
		os.MkdirAll(dir, 0o755)
		b, _ := os.ReadFile(shot)
		os.WriteFile(filepath.Join(dir, "report-run-faults.png"), b, 0o644)
		t.Logf("screenshot: %s", filepath.Join(dir, "report-run-faults.png"))
	}
}
