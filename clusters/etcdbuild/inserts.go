package etcdbuild

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// Failpoints inserted into old releases. etcd's robustness suite reproduces some of its bugs on releases
// that predate the failpoint that makes them reachable (beforeSendWatchResponse came with 3.5.20 and 3.6,
// compactBeforeSetFinishedCompact with 3.5.14, the fix of the very bug it reproduces). A failpoint build of
// such a release gets the gofail comment written into its copy of the server module before gofail runs, at
// the place later releases have it, so that the failpoint exists and the same scenario arms it on the
// release that had the bug and on the one that fixed it.
//
// An insertion is located in the syntax tree, not by line number or diff context: inside one named
// function, before the one statement whose source starts with a given text. A release whose source does
// not have exactly one such statement there is built without that failpoint (and says so), rather than with
// a failpoint in the wrong place.

// insertsVersion names the set of insertions below. A cached 3.5 failpoint build made before the set
// changed is rebuilt (see Cached): its binary would lack failpoints that scenarios now ask for.
const insertsVersion = "chaosbench-failpoint-inserts 1"

// InsertsFile, beside a 3.5 failpoint build's binary, names the insertion set it was built with and the
// failpoints it added, one a line after the set's name.
const InsertsFile = "inserted-failpoints"

// insertion adds one gofail failpoint to a release whose source lacks it.
type insertion struct {
	// Failpoint is the name, as later releases spell it.
	Failpoint string
	// File is the source file, relative to the server module's root.
	File string
	// Func is the function (or method, by its name alone) that holds the failpoint.
	Func string
	// Before is how the statement the failpoint comment precedes begins, after indentation.
	Before string
}

// insertions are the failpoints etcd's robustness suite adds to 3.5 releases for its regression tests:
// where they sit in v3.5.20 and v3.6 (server/etcdserver/api/v3rpc/watch.go, server/mvcc/kvstore_compaction.go
// in 3.5's layout).
var insertions = []insertion{
	{
		// Before the send of a watch response to the gRPC stream: a sleep here starves the stream, so
		// that watchers fall behind and etcd moves them to its unsynced and victim groups (#17529, #18089).
		Failpoint: "beforeSendWatchResponse",
		File:      "etcdserver/api/v3rpc/watch.go",
		Func:      "sendLoop",
		Before:    "if !fragmented && !ok {",
	},
	{
		// In the compaction's last batch, after the batch's deletes and before the finished compaction
		// revision is recorded: a crash here leaves the scheduled compaction unfinished (#17780).
		Failpoint: "compactBeforeSetFinishedCompact",
		File:      "mvcc/kvstore_compaction.go",
		Func:      "scheduleCompaction",
		Before:    "rbytes := make([]byte, 8+1+8)",
	},
}

// insertFailpoints writes into the server module copied to root the failpoints of insertions that its
// source does not declare (have: the names it declares). It returns the failpoints inserted and, for each
// one that could not be placed, why.
func insertFailpoints(root string, have []string) (inserted, skipped []string, err error) {
	declared := map[string]bool{}
	for _, n := range have {
		declared[n] = true
	}
	for _, in := range insertions {
		if declared[in.Failpoint] {
			continue
		}
		path := filepath.Join(root, filepath.FromSlash(in.File))
		src, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			skipped = append(skipped, fmt.Sprintf("%s: no %s", in.Failpoint, in.File))
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("insert failpoint %s: %w", in.Failpoint, err)
		}
		out, err := insertComment(src, in)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", in.Failpoint, err))
			continue
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return nil, nil, fmt.Errorf("insert failpoint %s: %w", in.Failpoint, err)
		}
		inserted = append(inserted, in.Failpoint)
	}
	return inserted, skipped, nil
}

// insertComment returns src with in's gofail comment on its own line before in's statement, indented as
// the statement is.
func insertComment(src []byte, in insertion) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, in.File, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", in.File, err)
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == in.Func && fd.Body != nil {
			if fn != nil {
				return nil, fmt.Errorf("%s declares %s twice", in.File, in.Func)
			}
			fn = fd
		}
	}
	if fn == nil {
		return nil, fmt.Errorf("%s has no function %s", in.File, in.Func)
	}
	var at []int
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		s, ok := n.(ast.Stmt)
		if !ok || s == nil {
			return true
		}
		if _, block := s.(*ast.BlockStmt); block {
			return true
		}
		off := fset.Position(s.Pos()).Offset
		if bytes.HasPrefix(src[off:], []byte(in.Before)) {
			at = append(at, off)
		}
		return true
	})
	if len(at) != 1 {
		return nil, fmt.Errorf("%s: %d statements in %s begin with %q, want one", in.File, len(at), in.Func, in.Before)
	}
	lineStart := bytes.LastIndexByte(src[:at[0]], '\n') + 1
	indent := src[lineStart:at[0]]
	if strings.TrimLeft(string(indent), " \t") != "" {
		return nil, fmt.Errorf("%s: the statement %q does not begin its line", in.File, in.Before)
	}
	var out bytes.Buffer
	out.Write(src[:lineStart])
	fmt.Fprintf(&out, "%s// gofail: var %s struct{}\n", indent, in.Failpoint)
	out.Write(src[lineStart:])
	return out.Bytes(), nil
}
