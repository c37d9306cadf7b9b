package etcdbuild

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInsertFailpointsRealSources inserts the failpoints into the server modules of the releases that
// etcd's regression tests patch (from the module proxy, through the Go module cache) and checks where the
// gofail comments land: in the function later releases have them in, directly before the statement they
// precede there, and only where the release lacks them.
func TestInsertFailpointsRealSources(t *testing.T) {
	tests := []struct {
		version  string
		inserted []string
	}{
		{version: "v3.5.12", inserted: []string{"beforeSendWatchResponse", "compactBeforeSetFinishedCompact"}},
		{version: "v3.5.13", inserted: []string{"beforeSendWatchResponse", "compactBeforeSetFinishedCompact"}},
		// v3.5.14 has compactBeforeSetFinishedCompact (its fix of #17780 came with it): left as it is.
		{version: "v3.5.14", inserted: []string{"beforeSendWatchResponse"}},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "server")
			if err := copyTree(moduleDir(t, "go.etcd.io/etcd/server/v3@"+tt.version), root); err != nil {
				t.Fatal(err)
			}
			before, _, err := scanFailpoints(root)
			if err != nil {
				t.Fatal(err)
			}
			compaction := filepath.Join(root, "mvcc", "kvstore_compaction.go")
			compactionBefore, err := os.ReadFile(compaction)
			if err != nil {
				t.Fatal(err)
			}
			inserted, skipped, err := insertFailpoints(root, before)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(inserted, tt.inserted) || len(skipped) > 0 {
				t.Fatalf("inserted %v (skipped %v), want %v", inserted, skipped, tt.inserted)
			}
			after, _, err := scanFailpoints(root)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range tt.inserted {
				if slices.Contains(before, name) || !slices.Contains(after, name) {
					t.Errorf("%s: declared before %v, after %v", name, slices.Contains(before, name), slices.Contains(after, name))
				}
			}
			if len(after) != len(before)+len(tt.inserted) {
				t.Errorf("%d failpoints before, %d after inserting %d", len(before), len(after), len(tt.inserted))
			}
			for _, in := range insertions {
				fn, next := placed(t, filepath.Join(root, filepath.FromSlash(in.File)), in.Failpoint)
				if fn != in.Func || !strings.HasPrefix(next, in.Before) {
					t.Errorf("%s is in %s before %q, want in %s before %q", in.Failpoint, fn, next, in.Func, in.Before)
				}
			}
			if !slices.Contains(tt.inserted, "compactBeforeSetFinishedCompact") {
				if got, _ := os.ReadFile(compaction); string(got) != string(compactionBefore) {
					t.Error("a file that already declared its failpoint was rewritten")
				}
			}
			// The compaction's crash point is in its last batch: inside the if that ends the loop, before
			// the finished compaction revision is written.
			src, _ := os.ReadFile(compaction)
			text := string(src)
			i := strings.Index(text, "// gofail: var compactBeforeSetFinishedCompact")
			cond := strings.LastIndex(text[:i], "if len(keys) < s.cfg.CompactionBatchLimit {")
			put := strings.Index(text[i:], "tx.UnsafePut(buckets.Meta, finishedCompactKeyName")
			if cond < 0 || put < 0 || strings.Count(text[cond:i], "\n") != 1 {
				t.Errorf("compactBeforeSetFinishedCompact is not the first line of the last batch's branch:\n%s", text[max(cond, 0):i+200])
			}
		})
	}
}

// placed returns the function whose body holds the gofail comment of failpoint in path, and the line after
// the comment (trimmed).
func placed(t *testing.T, path, failpoint string) (fn, next string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatalf("the source no longer parses: %v", err)
	}
	want := "// gofail: var " + failpoint + " struct{}"
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if c.Text != want {
				continue
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil && fd.Body.Pos() < c.Pos() && c.End() < fd.Body.End() {
					fn = fd.Name.Name
				}
			}
			rest := string(src[fset.Position(c.End()).Offset:])
			rest = strings.TrimPrefix(rest, "\n")
			line, _, _ := strings.Cut(rest, "\n")
			return fn, strings.TrimSpace(line)
		}
	}
	t.Fatalf("%s has no %q", path, want)
	return "", ""
}

// moduleDir downloads a module through the Go module proxy (into the shared module cache) and returns
// its directory.
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v: %s", mod, err, out)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s printed no directory: %s", mod, out)
	}
	return m.Dir
}

// TestInsertCommentRefusesAmbiguity: an insertion that cannot be placed exactly once in its function is
// refused, and a placed one keeps the statement's indentation.
func TestInsertCommentRefusesAmbiguity(t *testing.T) {
	in := insertion{Failpoint: "fp", File: "x.go", Func: "f", Before: "y := 1"}
	tests := []struct {
		name, src, want, errHas string
	}{
		{name: "placed", src: "package x\n\nfunc f() {\n\tif true {\n\t\ty := 1\n\t\t_ = y\n\t}\n}\n",
			want: "package x\n\nfunc f() {\n\tif true {\n\t\t// gofail: var fp struct{}\n\t\ty := 1\n\t\t_ = y\n\t}\n}\n"},
		{name: "other function only", src: "package x\n\nfunc g() {\n\ty := 1\n\t_ = y\n}\n\nfunc f() {}\n", errHas: "0 statements"},
		{name: "twice", src: "package x\n\nfunc f() {\n\t{\n\t\ty := 1\n\t\t_ = y\n\t}\n\ty := 1\n\t_ = y\n}\n", errHas: "2 statements"},
		{name: "no function", src: "package x\n", errHas: "no function f"},
		{name: "not first on its line", src: "package x\n\nfunc f() {\n\tif true { y := 1; _ = y }\n}\n", errHas: "does not begin its line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := insertComment([]byte(tt.src), in)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("got %v, want an error about %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestInsertFailpointsSkipsWhatItCannotPlace: a release whose source has no place for a failpoint (its
// statement missing, or its file) is left as it is, each failpoint not inserted named with the reason.
func TestInsertFailpointsSkipsWhatItCannotPlace(t *testing.T) {
	root := t.TempDir()
	watch := filepath.Join(root, "etcdserver", "api", "v3rpc", "watch.go")
	if err := os.MkdirAll(filepath.Dir(watch), 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package v3rpc\n\nfunc sendLoop() {\n\tsend()\n}\n\nfunc send() {}\n"
	if err := os.WriteFile(watch, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	inserted, skipped, err := insertFailpoints(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inserted) != 0 || len(skipped) != 2 ||
		!strings.Contains(skipped[0], "beforeSendWatchResponse") || !strings.Contains(skipped[0], "0 statements") ||
		!strings.Contains(skipped[1], "compactBeforeSetFinishedCompact") || !strings.Contains(skipped[1], "no mvcc/kvstore_compaction.go") {
		t.Fatalf("inserted %v, skipped %q", inserted, skipped)
	}
	if got, _ := os.ReadFile(watch); string(got) != src {
		t.Errorf("a file with no place for its failpoint was rewritten:\n%s", got)
	}
}
