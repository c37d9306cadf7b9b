package ci

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
)

// toolNames are the testenv constants by their Go names, to find them in the tests' source; kept in step
// with testenv.Tools by TestEveryToolHasATest.
var toolNames = map[string]testenv.Tool{
	"FUSE": testenv.FUSE, "Strace": testenv.Strace, "Docker": testenv.Docker, "Fio": testenv.Fio,
	"Chromium": testenv.Chromium, "Prometheus": testenv.Prometheus, "Etcdctl": testenv.Etcdctl,
	"Failpoints": testenv.Failpoints, "Kube": testenv.Kube, "KubeNode": testenv.KubeNode,
	"Debootstrap": testenv.Debootstrap,
}

// promiseTool matches a skip's reason that names one of the tools: such a skip must go through
// testenv.Missing, or CI would let the test skip.
var promiseTool = regexp.MustCompile(`(?i)\b(fuse|slowfs|strace|docker|fio|chromium|browser|prometheus|etcdctl|check perf|failpoints?|gofail|kubernetes|kwok|kube-apiserver|control plane|kubelet|containerd|runc|cni|debootstrap)\b`)

// skipsOnTools returns the places in src (a Go file) where a test skips, with t.Skip, t.Skipf or t.SkipNow,
// for a reason that names a tool, unless the skip is there for a short or a race-detector run (an if on
// testing.Short() or raceEnabled).
func skipsOnTools(fset *token.FileSet, name string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasPrefix(sel.Sel.Name, "Skip") {
			return true
		}
		var reason strings.Builder
		for _, a := range call.Args {
			ast.Inspect(a, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					reason.WriteString(lit.Value)
				}
				return true
			})
		}
		if !promiseTool.MatchString(reason.String()) {
			return true
		}
		for i := len(stack) - 2; i >= 0; i-- {
			if is, ok := stack[i].(*ast.IfStmt); ok {
				if cond := types.ExprString(is.Cond); strings.Contains(cond, "testing.Short()") || strings.Contains(cond, "raceEnabled") {
					return true
				}
				break
			}
		}
		out = append(out, fset.Position(call.Pos()).String()+": "+reason.String())
		return true
	})
	return out, nil
}

// testFiles returns the module's test files, by path from the module's root, with their content.
func testFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(strings.TrimPrefix(path, "../"))] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestPromiseSkipsGoThroughTestenv: no test skips for want of one of the tools on its own; it calls
// testenv.Missing, which fails it on CI (CHAOSBENCH_REQUIRE=all in .ci/run) instead of letting it skip.
func TestPromiseSkipsGoThroughTestenv(t *testing.T) {
	fset := token.NewFileSet()
	files := testFiles(t)
	if len(files) < 50 {
		t.Fatalf("found %d test files: the walk missed the module", len(files))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		found, err := skipsOnTools(fset, name, files[name])
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range found {
			t.Errorf("%s: a skip for want of a tool: call testenv.Missing, so that CI fails instead", s)
		}
	}
}

// TestSkipsOnToolsFound: the search finds a skip for want of a tool, and lets through the skips of a short
// run or under the race detector, and testenv.Missing itself.
func TestSkipsOnToolsFound(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		found      bool
	}{
		{"skip on a missing binary", `if _, err := exec.LookPath("fio"); err != nil { t.Skip("fio is not installed") }`, true},
		{"skipf naming Docker", `if err != nil { t.Skipf("container tests need a Docker engine: %v", err) }`, true},
		{"skip in a helper", `func() { tb.Skip("no Chromium found") }()`, true},
		{"skip in a case", `if tt.needs != nil { t.Skipf("needs FUSE: %v", tt.needs) }`, true},
		{"a short run", `if testing.Short() { t.Skip("runs a docker cluster for 20 s") }`, false},
		{"the race detector", `if raceEnabled { t.Skip("strace timing does not hold under the race detector") }`, false},
		{"through testenv", `if err != nil { testenv.Missing(t, testenv.FUSE, "needs FUSE: %v", err) }`, false},
		{"a reason naming no tool", `if err != nil { t.Skipf("no pseudo-terminal here: %v", err) }`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "package x\nfunc TestX(t *testing.T) {\n" + tc.body + "\n}\n"
			found, err := skipsOnTools(token.NewFileSet(), "x_test.go", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if (len(found) > 0) != tc.found {
				t.Errorf("found %v, want found %v", found, tc.found)
			}
		})
	}
}

// TestEveryToolHasATest: every tool CI is made to provide is needed by some test (a tool no test needs
// would be installed for nothing), and toolNames knows every tool.
func TestEveryToolHasATest(t *testing.T) {
	if got := slices.Sorted(maps.Values(toolNames)); !slices.Equal(got, slices.Sorted(slices.Values(testenv.Tools()))) {
		t.Fatalf("toolNames has %v, testenv.Tools() %v: keep them in step", got, testenv.Tools())
	}
	used := map[testenv.Tool][]string{}
	fset := token.NewFileSet()
	for name, src := range testFiles(t) {
		if strings.HasPrefix(name, "internal/testenv/") || strings.HasPrefix(name, "ci/") {
			continue
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "testenv" {
					if tool, ok := toolNames[sel.Sel.Name]; ok {
						used[tool] = append(used[tool], name)
					}
				}
			}
			return true
		})
	}
	for _, tool := range testenv.Tools() {
		if len(used[tool]) == 0 {
			t.Errorf("no test needs %s: drop it from testenv and .ci/run, or route its test through testenv.Missing", tool)
		}
	}
}
