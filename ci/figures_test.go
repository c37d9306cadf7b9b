package ci_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// figuresPage copies docs/figures.md into a temporary directory for ci/figures.sh to write.
func figuresPage(t *testing.T) (path string, original string) {
	t.Helper()
	data, err := os.ReadFile("../docs/figures.md")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "figures.md")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, string(data)
}

// TestFigures: make figures writes each figure's block of docs/figures.md, whole, from its command's output
// with the command, the commit and the machine, and keeps the rest of the page; every figure it measures has
// its block in the page; a figure whose command fails keeps what it had and fails the target, naming it. The
// bench targets themselves are stood in for by echo: they take minutes to hours.
func TestFigures(t *testing.T) {
	page, original := figuresPage(t)
	names := []string{"bench-vs-etcd", "bench-kube", "bench-scale", "bench-checker", "recording"}
	env := []string{"PAGE=" + page}
	for _, n := range names {
		env = append(env, "FIGURE_"+strings.ReplaceAll(n, "-", "_")+"=echo measured "+n)
	}
	out, code := script(t, env, "figures.sh")
	if code != 0 {
		t.Fatalf("figures.sh: exit %d\n%s", code, out)
	}
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	written := string(data)
	for _, n := range names {
		begin, end := "<!-- figure "+n+" -->\n", "<!-- end figure "+n+" -->"
		i, j := strings.Index(written, begin), strings.Index(written, end)
		if i < 0 || j < i {
			t.Fatalf("figure %s: no block in the written page", n)
		}
		block := written[i+len(begin) : j]
		for _, want := range []string{"Command: `echo measured " + n + "` at commit `", "Machine: ", " cores", "```text\nmeasured " + n + "\n```\n"} {
			if !strings.Contains(block, want) {
				t.Errorf("figure %s: block lacks %q:\n%s", n, want, block)
			}
		}
	}
	// Outside the blocks, the page is what it was.
	if outside(written) != outside(original) {
		t.Errorf("figures.sh changed the page outside its blocks")
	}

	// A failing figure keeps its block; the others are written; the target fails naming it.
	page, _ = figuresPage(t)
	out, code = script(t, []string{"PAGE=" + page, "FIGURES=bench-kube recording", "FIGURE_bench_kube=exit 3", "FIGURE_recording=echo fresh"}, "figures.sh")
	data, _ = os.ReadFile(page)
	if code != 1 || !strings.Contains(out, "not measured: bench-kube") || !strings.Contains(string(data), "```text\nfresh\n```") ||
		figureBlock(string(data), "bench-kube") != figureBlock(original, "bench-kube") {
		t.Errorf("a failing figure: exit %d (want 1)\n%s", code, out)
	}

	out, code = script(t, []string{"PAGE=" + page, "FIGURES=bench-nothing"}, "figures.sh")
	if code != 2 || !strings.Contains(out, "unknown figure bench-nothing") {
		t.Errorf("an unknown figure: exit %d (want 2)\n%s", code, out)
	}
}

// figureBlock is the content of figure name's block.
func figureBlock(page, name string) string {
	begin, end := "<!-- figure "+name+" -->\n", "<!-- end figure "+name+" -->"
	i, j := strings.Index(page, begin), strings.Index(page, end)
	if i < 0 || j < i {
		return ""
	}
	return page[i+len(begin) : j]
}

// outside is the page without the content of its figure blocks.
func outside(page string) string {
	var b strings.Builder
	skip := false
	for _, line := range strings.SplitAfter(page, "\n") {
		switch {
		case strings.HasPrefix(line, "<!-- figure "):
			b.WriteString(line)
			skip = true
		case strings.HasPrefix(line, "<!-- end figure "):
			skip = false
			b.WriteString(line)
		case !skip:
			b.WriteString(line)
		}
	}
	return b.String()
}
