package etcdbuild

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Failpoint builds. etcd marks the code points where real bugs hid with gofail comments
// (`// gofail: var raftBeforeSave struct{}`); `gofail enable` rewrites them into failpoints that a member
// started with GOFAIL_HTTP=host:port exposes over HTTP (PUT /name with a term such as panic or sleep(100),
// DELETE /name, GET /name/count). A failpoint build copies the release's server module out of the module
// cache, lets gofail rewrite every package that has failpoints, and builds against that copy.

// GofailModule is the gofail release that rewrites the sources and serves the failpoints at run time.
const GofailModule = "go.etcd.io/gofail@v0.2.0"

// FailpointsFile, beside a failpoint build's binary, lists its failpoint names, one per line.
const FailpointsFile = "failpoints"

var gofailVar = regexp.MustCompile(`//\s*gofail:\s*var\s+([A-Za-z_][A-Za-z0-9_]*)`)

// enableFailpoints prepares work (a module with go.mod and main.go) to build r with failpoints: the server
// module copied into work/server, the failpoints a 3.5 release lacks inserted (inserts.go), rewritten by
// gofail, and required through a replace. It returns the failpoint names, sorted, and those it inserted;
// log receives a line about each insertion made or not made.
func enableFailpoints(ctx context.Context, r Release, work string, log io.Writer) (names, inserted []string, err error) {
	if r.Minor < 5 {
		return nil, nil, outcome.Usagef("etcd version %s: failpoint builds need etcd 3.5 or later", r.Version)
	}
	run := func(dir string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("build etcd %s: %w", r, ctx.Err())
			}
			text := strings.TrimSpace(stderr.String() + "\n" + string(out))
			if args[1] == "mod" && notServed(text) {
				return nil, outcome.Usagef("etcd version %s: the Go module proxy does not serve %s@%s (%s)", r.Version, r.Module, r.ModuleVersion, lastLine(text))
			}
			return nil, fmt.Errorf("build etcd %s: %s: %w\n%s", r, strings.Join(args, " "), err, tail(text, 20))
		}
		return out, nil
	}
	out, err := run(work, "go", "mod", "download", "-json", r.Module+"@"+r.ModuleVersion)
	if err != nil {
		return nil, nil, err
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, nil, fmt.Errorf("build etcd %s: go mod download printed no module directory: %s", r, out)
	}
	server := filepath.Join(work, "server")
	if err := copyTree(mod.Dir, server); err != nil {
		return nil, nil, fmt.Errorf("build etcd %s: copy the server module: %w", r, err)
	}
	names, dirs, err := scanFailpoints(server)
	if err != nil {
		return nil, nil, fmt.Errorf("build etcd %s: %w", r, err)
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("build etcd %s: the server module has no gofail failpoints", r)
	}
	if r.Minor == 5 {
		var skipped []string
		if inserted, skipped, err = insertFailpoints(server, names); err != nil {
			return nil, nil, fmt.Errorf("build etcd %s: %w", r, err)
		}
		for _, s := range skipped {
			fmt.Fprintf(log, "etcd %s: failpoint not inserted, %s\n", r, s)
		}
		if len(inserted) > 0 {
			fmt.Fprintf(log, "etcd %s: inserted failpoints %s\n", r, strings.Join(inserted, ", "))
			if names, dirs, err = scanFailpoints(server); err != nil {
				return nil, nil, fmt.Errorf("build etcd %s: %w", r, err)
			}
		}
	}
	if _, err := run(work, append([]string{"go", "run", GofailModule, "enable"}, dirs...)...); err != nil {
		return nil, nil, err
	}
	if _, err := run(server, "go", "mod", "edit", "-require", GofailModule); err != nil {
		return nil, nil, err
	}
	if _, err := run(work, "go", "mod", "edit", "-require", r.Module+"@"+r.ModuleVersion, "-replace", r.Module+"=./server"); err != nil {
		return nil, nil, err
	}
	return names, inserted, nil
}

// scanFailpoints returns the failpoint names declared under root and the directories (relative to the
// module above root) that declare them.
func scanFailpoints(root string) (names, dirs []string, err error) {
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		found := false
		for sc.Scan() {
			if m := gofailVar.FindStringSubmatch(sc.Text()); m != nil {
				found = true
				if !seen[m[1]] {
					seen[m[1]] = true
					names = append(names, m[1])
				}
			}
		}
		if found {
			rel, _ := filepath.Rel(filepath.Dir(root), filepath.Dir(path))
			if !slices.Contains(dirs, rel) {
				dirs = append(dirs, rel)
			}
		}
		return sc.Err()
	})
	slices.Sort(names)
	slices.Sort(dirs)
	return names, dirs, err
}

// copyTree copies a module directory (read-only in the module cache) into a writable tree.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}

// FailpointNames returns the failpoints of a failpoint build, from the list beside its binary.
func FailpointNames(bin string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(bin), FailpointsFile))
	if err != nil {
		return nil, fmt.Errorf("failpoints of %s: %w", bin, err)
	}
	return strings.Fields(string(data)), nil
}
