package chaosbench

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docPages are the pages a newcomer reads: the README and the reference beside it.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// mdLink is a Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link of README.md and docs/*.md names a file of the repository, and every
// anchor a heading of the page it points into (as GitHub makes anchors of headings); a file or heading
// that moved breaks this test instead of a reader's click.
func TestDocLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		data, err := os.ReadFile(page)
		if err != nil {
			return nil
		}
		anchors[page] = headingAnchors(string(data))
		return anchors[page]
	}
	for _, page := range docPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range outsideCode(string(data)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link %s: no such file %s", page, n+1, target, path)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(path, ".md") {
					t.Errorf("%s:%d: link %s: an anchor into a file that is not Markdown", page, n+1, target)
					continue
				}
				if !anchorsOf(path)[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", page, n+1, target, path, anchor)
				}
			}
		}
	}
}

// repoPath is a file of the repository named in inline code: ci/chaos/kube.yaml, docs/examples/x.yaml.
var repoPath = regexp.MustCompile("`((?:ci|docs|results|linearizability|clusters|workloads|faults|outcome|cmd|\\.github)/[A-Za-z0-9_./-]+)`")

// TestDocPaths: a repository file the pages name in inline code exists (an example they name is there to
// be run); a name with an all-capitals element (RUN, DIR) is a placeholder.
func TestDocPaths(t *testing.T) {
	for _, page := range docPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range outsideCode(string(data)) {
			for _, m := range repoPath.FindAllStringSubmatch(line, -1) {
				p := strings.TrimSuffix(m[1], "/")
				if regexp.MustCompile(`(^|/)[A-Z][A-Z0-9_-]+(/|$)`).MatchString(p) || strings.HasPrefix(p, "results/20") {
					continue
				}
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s:%d: names %s, which the repository does not have", page, n+1, p)
				}
			}
		}
	}
}

// outsideCode returns a page's lines with the lines of fenced code blocks blanked.
func outsideCode(text string) []string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives a page's headings: the heading's text without its
// Markdown, in lower case, without punctuation but hyphens and underscores, spaces as hyphens, and a
// repeated anchor numbered (-1, -2, ...).
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range outsideCode(text) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		heading = mdLinkText.ReplaceAllString(heading, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// mdLinkText is a link in a heading, of which the anchor keeps the text.
var mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// TestHeadingAnchors: anchors as GitHub makes them.
func TestHeadingAnchors(t *testing.T) {
	got := headingAnchors("# Faults and failpoints\n## Failpoints: crashes and stalls at the exact code points\n" +
		"## `--workload controlplane`\n## chaosbench against etcd's own benchmark tool\n## Trends: since when, and is it noise?\n" +
		"```\n# not a heading\n```\n## Notes\n## Notes\n")
	for _, want := range []string{"faults-and-failpoints", "failpoints-crashes-and-stalls-at-the-exact-code-points",
		"--workload-controlplane", "chaosbench-against-etcds-own-benchmark-tool", "trends-since-when-and-is-it-noise",
		"notes", "notes-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a code block taken for a heading")
	}
}
