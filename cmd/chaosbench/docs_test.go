package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// repoRoot is where the documentation's relative paths start: a command in the docs is run from a clone's
// top directory.
const repoRoot = "../.."

// docCommand is one chaosbench command line of the documentation or of a command's help examples.
type docCommand struct {
	where string   // file:line, or the help command's path
	line  string   // as written
	env   []string // NAME=value assignments before the command
	args  []string // after the program
	// redirect is the file a > redirection writes, if the line has one.
	redirect string
}

// The programs a documented command line may start with.
var docPrograms = [][]string{{"chaosbench"}, {"bin/chaosbench"}, {"./bin/chaosbench"}, {"go", "run", "./cmd/chaosbench"}}

// TestDocsCommands runs every chaosbench command line of README.md, docs/*.md and the commands' help
// examples, as a fresh clone would, without starting anything: a job that has a dry run (run, qualify,
// suite, compare, fidelity) runs with --dry-run, which checks every setting as the job would and prints its
// plan; kube render and version run as written (they start nothing); every other command runs with --help,
// which still parses every flag. It fails on a usage error, an unknown command or flag, and a file named
// that does not exist: a scenario file, a suite directory, a run directory to read. A path an earlier
// command of the same page writes (--out, --json, --bundle, > FILE) counts as there, and the command that
// reads it runs with --help; a placeholder (an all-capitals path element such as RUN, BASE or DIR) is
// not looked for.
func TestDocsCommands(t *testing.T) {
	unsetEtcdctlEnv(t)
	var cmds []docCommand
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(repoRoot, "README.md")}, files...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, f)
		cmds = append(cmds, markdownCommands(rel, string(data))...)
	}
	if len(cmds) < 50 {
		t.Fatalf("found %d command lines in the docs; the extraction is broken", len(cmds))
	}
	var code int
	root := newRoot(io.Discard, io.Discard, &code)
	walkCommands(root, func(c *cobra.Command) {
		cmds = append(cmds, exampleCommands(c.CommandPath(), c.Example)...)
	})
	// Planned in page order (a page's commands may read what its earlier ones write), then run in
	// parallel: each start of the binary takes a few hundred milliseconds.
	produced := map[string]map[string]bool{} // page -> paths its commands write
	ran := map[string]bool{}
	t.Run("commands", func(t *testing.T) {
		for _, dc := range cmds {
			page, _, _ := strings.Cut(dc.where, ":")
			if produced[page] == nil {
				produced[page] = map[string]bool{}
			}
			args, problems := planDocCommand(root, dc, produced[page])
			key := strings.Join(dc.env, " ") + " " + strings.Join(args, "\x00")
			if len(problems) == 0 && ran[key] {
				continue // the same command on another page
			}
			ran[key] = true
			t.Run(dc.where, func(t *testing.T) {
				t.Parallel()
				for _, p := range problems {
					t.Errorf("%s\n%s", dc.line, p)
				}
				if args != nil {
					runDocCommand(t, dc, args)
				}
			})
		}
	})
}

// planDocCommand decides how TestDocsCommands runs a documented command, as it says, and records what the
// command writes. It returns the arguments to run it with (nil when it cannot run) and what is wrong.
func planDocCommand(root *cobra.Command, dc docCommand, produced map[string]bool) (args []string, problems []string) {
	cmd, rest, err := root.Find(dc.args)
	if err != nil || cmd == root {
		return nil, []string{fmt.Sprintf("no such command: %v", err)}
	}
	path := strings.TrimPrefix(cmd.CommandPath(), "chaosbench ")
	mode := "--help"
	switch {
	case path == "version" || path == "kube render" || (path == "suite" && slices.Contains(rest, "--list")):
		mode = ""
	case cmd.Flags().Lookup("dry-run") != nil:
		mode = "--dry-run"
	}
	for _, p := range docInputs(path, dc.args) {
		switch {
		case produced[p]:
			mode = "--help" // written by an earlier command of the page; a dry run would not find it
		case isPlaceholder(p):
			if mode != "--help" {
				problems = append(problems, p+" is a placeholder: give a file that exists")
			}
		default:
			if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
				problems = append(problems, fmt.Sprintf("names %s, which a fresh clone does not have", p))
			}
		}
	}
	for _, p := range docOutputs(dc.args) {
		produced[p] = true
	}
	if dc.redirect != "" {
		produced[dc.redirect] = true
	}
	args = slices.Clone(dc.args)
	if mode != "" && !slices.Contains(args, mode) {
		args = append(args, mode)
	}
	return args, problems
}

// runDocCommand runs a documented command with args from a clone's top directory.
func runDocCommand(t *testing.T, dc docCommand, args []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, binary, args...)
	c.Dir = repoRoot
	c.Env = append(os.Environ(), dc.env...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		t.Errorf("%s\nran: chaosbench %s\n%v\n%s", dc.line, strings.Join(args, " "), err, lastLines(out.String(), 15))
	}
}

// docInputs are the paths command path reads, as written in args: scenario files, suite paths, recorded
// runs and attached results.
func docInputs(path string, args []string) []string {
	var in []string
	positional := map[string]bool{"suite": true, "report": true, "check": true, "trend": true, "merge": true,
		"history dump": true, "history convert": true}[path]
	words := strings.Fields(path)
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case name == "--profile" && !hasValue && (i+1 == len(args) || strings.HasPrefix(args[i+1], "-")):
			// fidelity --profile is a switch; run and qualify --profile read a file.
		case slices.Contains([]string{"--config", "--disk-result", "--replay", "--observer", "--profile"}, name):
			if !hasValue && i+1 < len(args) {
				i++
				value = args[i]
			}
			in = append(in, value)
		case strings.HasPrefix(a, "-"):
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && takesValue(a) {
				i++
			}
		case len(words) > 0 && a == words[0]:
			words = words[1:]
		case positional:
			in = append(in, strings.Split(strings.TrimSuffix(a, "/"), ",")...)
		}
	}
	return in
}

// takesValue reports whether a flag of the docs takes a value after it: every flag but the switches.
func takesValue(flag string) bool {
	switch flag {
	case "--tls", "--dry-run", "--failpoints", "--binary-only", "--list", "--retry-harness", "--redact",
		"--with-faults", "--etcdctl-compat", "--watches", "--all", "--images", "--cache", "--prev-kv",
		"--across-hosts", "--worker-containers", "--fail-on-regression", "--check", "--check-during-load", "--help", "--scale-rates":
		return false
	}
	return true
}

// docOutputs are the paths a command writes with --out, --json and --bundle.
func docOutputs(args []string) []string {
	var out []string
	for i, a := range args {
		name, value, hasValue := strings.Cut(a, "=")
		if !slices.Contains([]string{"--out", "--json", "--bundle"}, name) {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		out = append(out, strings.TrimSuffix(value, "/"))
	}
	return out
}

// placeholderElement is a path element that stands for the reader's own: RUN, BASE, DIR, OLD-RUN.
var placeholderElement = regexp.MustCompile(`^[A-Z][A-Z0-9_-]+$`)

func isPlaceholder(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if placeholderElement.MatchString(e) {
			return true
		}
	}
	return false
}

// markdownCommands extracts the chaosbench command lines of a Markdown page's fenced code blocks.
func markdownCommands(page, text string) []docCommand {
	var cmds []docCommand
	lines := strings.Split(text, "\n")
	fence := ""
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			switch {
			case fence == "":
				fence = trimmed[:3]
			case strings.HasPrefix(trimmed, fence):
				fence = ""
			}
			continue
		}
		if fence == "" {
			continue
		}
		start := i
		line := trimmed
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		if dc, ok := parseCommandLine(line); ok {
			dc.where = fmt.Sprintf("%s:%d", page, start+1)
			cmds = append(cmds, dc)
		}
	}
	return cmds
}

// exampleCommands extracts the chaosbench command lines of a command's help examples.
func exampleCommands(path, example string) []docCommand {
	var cmds []docCommand
	lines := strings.Split(example, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		if dc, ok := parseCommandLine(line); ok {
			dc.where = fmt.Sprintf("%s --help:%d", path, i+1)
			cmds = append(cmds, dc)
		}
	}
	return cmds
}

// parseCommandLine splits a shell line into its environment assignments, its program and its arguments,
// up to the first operator (a pipe, a redirection, &&, ;) or comment, and the file a > redirection
// writes. It reports whether the line runs chaosbench.
func parseCommandLine(line string) (docCommand, bool) {
	line = strings.TrimPrefix(line, "$ ")
	words, redirect := shellWords(line)
	dc := docCommand{line: line}
	for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
		dc.env, words = append(dc.env, words[0]), words[1:]
	}
	for _, p := range docPrograms {
		if len(words) > len(p) && slices.Equal(words[:len(p)], p) {
			dc.args, dc.redirect = words[len(p):], redirect
			return dc, true
		}
	}
	return dc, false
}

// shellWords splits a shell command into words as sh would (quotes, backslashes), up to its first
// operator or comment, and returns the target of a > redirection that ends it.
func shellWords(line string) (words []string, redirect string) {
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				w.WriteByte(line[i])
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			flush()
			return words, ""
		case c == '>':
			flush()
			rest, _ := shellWords(strings.TrimLeft(line[i+1:], ">"))
			if len(rest) > 0 {
				redirect = rest[0]
			}
			return words, redirect
		case c == '|' || c == ';' || c == '&' || c == '<':
			flush()
			return words, ""
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, ""
}

// walkCommands calls f for every command under c, hidden ones included.
func walkCommands(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walkCommands(sub, f)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestShellWords: the documentation's command lines split as a shell splits them.
func TestShellWords(t *testing.T) {
	tests := []struct {
		line     string
		words    []string
		redirect string
	}{
		{"chaosbench run --faults 'partition:leader=refuse|clients@20s+10s'  # refuse", []string{"chaosbench", "run", "--faults", "partition:leader=refuse|clients@20s+10s"}, ""},
		{`chaosbench compare --etcd-flag-set "" --etcd-flag-set "a=1 b=2"`, []string{"chaosbench", "compare", "--etcd-flag-set", "", "--etcd-flag-set", "a=1 b=2"}, ""},
		{"chaosbench history dump results/RUN | jq -c 'select(.error)'", []string{"chaosbench", "history", "dump", "results/RUN"}, ""},
		{"chaosbench kube render --workers 3 > split.yaml", []string{"chaosbench", "kube", "render", "--workers", "3"}, "split.yaml"},
		{"kubectl apply -f split.yaml && kubectl wait", []string{"kubectl", "apply", "-f", "split.yaml"}, ""},
		{`chaosbench run --threshold 'put:p99<25ms' --threshold errors\<1%`, []string{"chaosbench", "run", "--threshold", "put:p99<25ms", "--threshold", "errors<1%"}, ""},
	}
	for _, tt := range tests {
		words, redirect := shellWords(tt.line)
		if !slices.Equal(words, tt.words) || redirect != tt.redirect {
			t.Errorf("%s\n got %q > %q\nwant %q > %q", tt.line, words, redirect, tt.words, tt.redirect)
		}
	}
	dc, ok := parseCommandLine("ETCDCTL_ENDPOINTS=127.0.0.1:2379 go run ./cmd/chaosbench run --cluster external")
	if !ok || !slices.Equal(dc.env, []string{"ETCDCTL_ENDPOINTS=127.0.0.1:2379"}) || !slices.Equal(dc.args, []string{"run", "--cluster", "external"}) {
		t.Errorf("env and go run: %+v %v", dc, ok)
	}
	if _, ok := parseCommandLine("replay: chaosbench run --config x.yaml"); ok {
		t.Errorf("printed output taken for a command")
	}
}
