package chaosbench

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The house rules of ARCHITECTURE.md, checked against the code: the layer table there is the one the imports
// are held to, and its list of exceptions is the only place a long file or function may be excused. Editing
// the document is how a rule changes; a package the document does not place fails the test until it does.

const (
	architectureFile = "ARCHITECTURE.md"
	modulePath       = "github.com/etcd-chaosbench/chaosbench"
	maxFileLines     = 600
	maxFuncLines     = 100
)

// cliImports returns the only packages of this module the CLI p may import (ok false for other packages): it
// maps commands to the application's functions and exit codes, nothing else.
func cliImports(p string) (allowed []string, ok bool) {
	if p == "cmd/chaosbench" {
		return []string{".", "outcome"}, true
	}
	return nil, false
}

// house is what ARCHITECTURE.md says: the layer of each package (module-relative directory, "." for the root)
// and the excused files ("path") and functions ("path:Func") with their reasons.
type house struct {
	layer      map[string]int
	layerName  map[int]string
	exceptions map[string]string
}

var (
	layerRow     = regexp.MustCompile(`^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|\s*([^|]*)\|`)
	backticked   = regexp.MustCompile("`([^`]+)`")
	exceptionRow = regexp.MustCompile("^- `([^`]+)`:?\\s*(.*)$")
)

// readHouse parses ARCHITECTURE.md's layer table (rows "| n | name | `pkg`, `pkg` | ...") and its
// "Exceptions" section (items "- `path[:Func]`: why").
func readHouse(path string) (house, error) {
	h := house{layer: map[string]int{}, layerName: map[int]string{}, exceptions: map[string]string{}}
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	inExceptions := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inExceptions = strings.Contains(strings.ToLower(line), "exceptions")
			continue
		}
		if m := layerRow.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			h.layerName[n] = m[2]
			for _, p := range backticked.FindAllStringSubmatch(m[3], -1) {
				if prev, dup := h.layer[p[1]]; dup {
					return h, fmt.Errorf("%s: package %s is in layers %d and %d", path, p[1], prev, n)
				}
				h.layer[p[1]] = n
			}
			continue
		}
		if m := exceptionRow.FindStringSubmatch(line); inExceptions && m != nil {
			if strings.TrimSpace(m[2]) == "" {
				return h, fmt.Errorf("%s: exception %s gives no reason", path, m[1])
			}
			h.exceptions[m[1]] = m[2]
		}
	}
	if err := sc.Err(); err != nil {
		return h, err
	}
	if len(h.layer) == 0 {
		return h, fmt.Errorf("%s: no layer table", path)
	}
	return h, nil
}

// layerViolations returns every import that breaks the house's rules: a package no layer holds, an import
// from a higher layer, or a CLI import outside cliImports. imports maps each package to what it imports
// from this module (module-relative).
func layerViolations(h house, imports map[string][]string) []string {
	var out []string
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		lp, ok := h.layer[p]
		if !ok {
			out = append(out, fmt.Sprintf("%s is in no layer of %s: add it to the table", p, architectureFile))
			continue
		}
		for _, dep := range imports[p] {
			ld, ok := h.layer[dep]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s imports %s, which is in no layer of %s", p, dep, architectureFile))
			case ld > lp:
				out = append(out, fmt.Sprintf("%s (layer %d, %s) imports %s (layer %d, %s): imports go down the layers, never up",
					p, lp, h.layerName[lp], dep, ld, h.layerName[ld]))
			}
			if allowed, ok := cliImports(p); ok && !slices.Contains(allowed, dep) {
				out = append(out, fmt.Sprintf("%s imports %s: the CLI imports only %s", p, dep, strings.Join(allowed, ", ")))
			}
		}
	}
	for p := range h.layer {
		if _, ok := imports[p]; !ok {
			out = append(out, fmt.Sprintf("%s names package %s, which does not exist", architectureFile, p))
		}
	}
	return out
}

// moduleImports lists, with `go list`, each package of the module and the module's packages its non-test
// files import.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) (string, bool) {
		if p == modulePath {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, modulePath+"/")
		return r, ok
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		p, _ := rel(fields[0])
		deps := []string{}
		for _, d := range fields[1:] {
			if r, ok := rel(d); ok {
				deps = append(deps, r)
			}
		}
		imports[p] = deps
	}
	return imports
}

func TestLayers(t *testing.T) {
	h, err := readHouse(architectureFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range layerViolations(h, moduleImports(t)) {
		t.Error(v)
	}
}

// The rule itself must catch what it is there to catch.
func TestLayerViolationsFound(t *testing.T) {
	h := house{
		layer:     map[string]int{"outcome": 0, "workloads": 4, "linearizability": 5, ".": 7, "cmd/chaosbench": 8, "clusters": 3},
		layerName: map[int]string{0: "vocabulary", 3: "clusters", 4: "load", 5: "checks", 7: "app", 8: "cli"},
	}
	cases := []struct {
		name    string
		imports map[string][]string
		want    []string
	}{
		{"down and sideways are fine", map[string][]string{
			"outcome": {}, "clusters": {"outcome"}, "workloads": {"outcome"}, "linearizability": {},
			".": {"workloads", "linearizability", "clusters"}, "cmd/chaosbench": {".", "outcome"},
		}, nil},
		{"load importing its checker", map[string][]string{
			"outcome": {}, "clusters": {}, "workloads": {"linearizability"}, "linearizability": {}, ".": {}, "cmd/chaosbench": {},
		}, []string{"workloads (layer 4, load) imports linearizability (layer 5, checks)"}},
		{"CLI reaching past the app", map[string][]string{
			"outcome": {}, "clusters": {}, "workloads": {}, "linearizability": {}, ".": {}, "cmd/chaosbench": {".", "clusters"},
		}, []string{"cmd/chaosbench imports clusters: the CLI imports only"}},
		{"unplaced package", map[string][]string{
			"outcome": {}, "clusters": {}, "workloads": {}, "linearizability": {}, ".": {}, "cmd/chaosbench": {}, "util": {},
		}, []string{"util is in no layer"}},
		{"table naming a package that is gone", map[string][]string{
			"outcome": {}, "workloads": {}, "linearizability": {}, ".": {}, "cmd/chaosbench": {},
		}, []string{"names package clusters, which does not exist"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := layerViolations(h, c.imports)
			if len(got) != len(c.want) {
				t.Fatalf("violations %q, want %d matching %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %q, want it to say %q", got[i], w)
				}
			}
		})
	}
}

// sizeViolations walks the Go files under root (tests, testdata and hidden directories aside) and returns
// every file over maxFileLines and function over maxFuncLines that exceptions do not excuse, and every
// exception that excuses nothing any more.
func sizeViolations(root string, exceptions map[string]string) ([]string, error) {
	var out []string
	used := map[string]bool{}
	excused := func(key string) bool {
		if _, ok := exceptions[key]; ok {
			used[key] = true
			return true
		}
		return false
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines && !excused(rel) {
			out = append(out, fmt.Sprintf("%s: %d lines (at most %d, or a reason in %s)", rel, n, maxFileLines, architectureFile))
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if key := rel + ":" + fn.Name.Name; n > maxFuncLines && !excused(key) {
				out = append(out, fmt.Sprintf("%s: %d lines (at most %d, or a reason in %s)", key, n, maxFuncLines, architectureFile))
			}
		}
		return nil
	})
	for key := range exceptions {
		if !used[key] {
			out = append(out, fmt.Sprintf("%s excuses %s, which is no longer too long (or gone): remove it", architectureFile, key))
		}
	}
	slices.Sort(out)
	return out, err
}

func TestSizes(t *testing.T) {
	h, err := readHouse(architectureFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sizeViolations(".", h.exceptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got {
		t.Error(v)
	}
}

func TestSizeViolationsFound(t *testing.T) {
	dir := t.TempDir()
	long := "package p\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n\nfunc short() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	big := "package p\n" + strings.Repeat("var _ = 1\n", maxFileLines)
	if err := os.WriteFile(filepath.Join(dir, "big.go"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big_test.go"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := sizeViolations(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"big.go: 601 lines", "p.go:long: 102 lines"}
	if len(got) != len(want) {
		t.Fatalf("violations %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %q, want %q", got[i], want[i])
		}
	}
	got, err = sizeViolations(dir, map[string]string{"big.go": "a table", "p.go:long": "a table", "p.go:short": "stale"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got[0], "excuses p.go:short, which is no longer too long") {
		t.Errorf("with exceptions: %q, want only the stale one reported", got)
	}
}
