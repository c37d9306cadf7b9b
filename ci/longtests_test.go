package ci

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
)

// longTestProblems returns what is wrong with the long tests of src (a Go test file): a test named
// TestLongSomething that does not call testenv.Long (it would run in make test and make test-long both), or a
// call of testenv.Long outside a test so named (make test-long would never select it; testenv.Long also
// fails such a test when it runs).
func longTestProblems(fset *token.FileSet, name string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		calls := false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Long" {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "testenv" {
					calls = true
				}
			}
			return true
		})
		named := fn.Recv == nil && testenv.IsLongName(fn.Name.Name)
		switch {
		case named && !calls:
			out = append(out, fset.Position(fn.Pos()).String()+": "+fn.Name.Name+" is named as a long test and does not call testenv.Long: it would run in make test too")
		case calls && !named:
			out = append(out, fset.Position(fn.Pos()).String()+": "+fn.Name.Name+" calls testenv.Long: name it TestLongSomething ("+testenv.LongPattern+"), or make test-long never runs it")
		}
	}
	return out, nil
}

// TestNamesOfLongTests: every long test is named so that make test-long selects it, and every test so
// named is long; at least one long test exists (else make test-long would prove nothing).
func TestNamesOfLongTests(t *testing.T) {
	fset := token.NewFileSet()
	files := testFiles(t)
	long := 0
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasPrefix(name, "internal/testenv/") {
			continue // testenv's own tests of Long
		}
		found, err := longTestProblems(fset, name, files[name])
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range found {
			t.Error(s)
		}
		long += strings.Count(string(files[name]), "testenv.Long(")
	}
	if long == 0 {
		t.Errorf("no test calls testenv.Long: make test-long would run nothing")
	}
}

// TestProblemsOfLongTestsFound: the search finds a long test named otherwise and a TestLongSomething that
// is not long, and lets through a long test, a long subtest of one, and ordinary tests and helpers.
func TestProblemsOfLongTestsFound(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		found     bool
	}{
		{"a long test", `func TestLongSoak(t *testing.T) { testenv.Long(t, "10 minutes"); run(t) }`, false},
		{"a long subtest", `func TestLongMatrix(t *testing.T) { t.Run("x", func(t *testing.T) { testenv.Long(t, "3 versions") }) }`, false},
		{"an ordinary test", `func TestQuick(t *testing.T) { run(t) }`, false},
		{"an ordinary test named TestLonger...", `func TestLongestGap(t *testing.T) { run(t) }`, false},
		{"a helper", `func longRun(t *testing.T) { run(t) }`, false},
		{"long, named otherwise", `func TestSoak(t *testing.T) { testenv.Long(t, "10 minutes") }`, true},
		{"long in a helper", `func soak(t *testing.T) { testenv.Long(t, "10 minutes") }`, true},
		{"named long, not long", `func TestLongSoak(t *testing.T) { run(t) }`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := longTestProblems(token.NewFileSet(), "x_test.go", []byte("package x\n"+tc.src+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if (len(found) > 0) != tc.found {
				t.Errorf("found %v, want found %v", found, tc.found)
			}
		})
	}
}

// makeRecipe returns the recipe of target in the Makefile's content (its tab-indented lines).
func makeRecipe(makefile, target string) string {
	var recipe []string
	in := false
	for _, line := range strings.Split(makefile, "\n") {
		switch {
		case strings.HasPrefix(line, target+":"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			recipe = append(recipe, line)
		case in:
			return strings.Join(recipe, "\n")
		}
	}
	return strings.Join(recipe, "\n")
}

// TestMakeTargetsSplitTheLongTests: make test runs the tests with CHAOSBENCH_LONG empty (the long ones skip,
// saying they run in make test-long), and make test-long runs exactly the tests named TestLongSomething
// with CHAOSBENCH_LONG=1, so that every test runs in one of the two.
func TestMakeTargetsSplitTheLongTests(t *testing.T) {
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	test, long := makeRecipe(string(b), "test"), makeRecipe(string(b), "test-long")
	goTest := regexp.MustCompile(`\$\(GO\) test `)
	if !strings.Contains(test, testenv.LongEnv+"= ") || len(goTest.FindAllString(test, -1)) == 0 || strings.Contains(test, " -run") {
		t.Errorf("make test must run every test with %s empty:\n%s", testenv.LongEnv, test)
	}
	if !strings.Contains(long, testenv.LongEnv+"=1 ") || !strings.Contains(long, "-run '"+testenv.LongPattern+"'") || !strings.Contains(long, "./...") {
		t.Errorf("make test-long must run the tests %s matches, of every package, with %s=1:\n%s", testenv.LongPattern, testenv.LongEnv, long)
	}
}
