package report

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// bundled are the files of a run (or comparison) directory a bundle holds: what a reader needs to see
// every figure (reports, summaries, time series, interval and percentile histograms, faults, etcd's
// metrics) and nothing else. It is a list of what to take, not of what to leave: a run directory also
// holds TLS keys (--tls), logs and member data, and none of that may leave the machine by accident.
var bundled = []string{
	results.SummaryFile, HTMLFile, MarkdownFile, JUnitFile, PerfdashFile, "check.json",
	results.TimeSeriesFile, "latency.hlog", results.FaultsFile, "server_metrics.jsonl",
	ComparisonMarkdownFile, ComparisonHTMLFile, "compare.md", "compare.json", "compare.html",
}

// bundledExt are extensions of further files a bundle holds, in the directory or its histogram folder.
var bundledExt = []string{".hgrm"}

// secretFlag matches command-line flags whose values are secrets: their values are never bundled.
var secretFlag = regexp.MustCompile(`(?i)^--?[a-z0-9-]*(password|passwd|token|secret|auth)[a-z0-9-]*$`)

// keyMaterial is what a file must never contain to be bundled.
var keyMaterial = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----|(?i)"?(password|token|secret)"?\s*[:=]\s*"[^"]+"`)

// BundleOptions say what goes into a bundle.
type BundleOptions struct {
	// Redact replaces the clusters' endpoints (URLs, host:port, hosts) by endpoint-1, endpoint-2, ... in
	// every file.
	Redact bool
}

// WriteBundle writes a gzipped tar archive of the directories (run directories, or a comparison's
// directory and its runs) to w: each directory's reports, summary, time series, histograms and faults under
// its base name, a scenario.json with the run's settings, and a README.txt saying how to re-run it.
// Values of secret flags in stored command lines are replaced; a file that still holds key material or a
// secret makes the bundle fail rather than carry it.
func WriteBundle(w io.Writer, dirs []string, opts BundleOptions) error {
	files := map[string][]byte{}
	var names []string
	add := func(name string, b []byte) {
		if _, ok := files[name]; !ok {
			names = append(names, name)
		}
		files[name] = b
	}
	var endpoints []string
	var readme strings.Builder
	readme.WriteString("chaosbench report bundle\n\nOpen each directory's report.html (or comparison.html) in a browser: it needs no network.\n")
	used := map[string]bool{}
	root := commonParent(dirs)
	for _, dir := range dirs {
		name := filepath.Base(filepath.Clean(dir))
		if abs, err := filepath.Abs(dir); err == nil && root != "" {
			if rel, err := filepath.Rel(root, abs); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
				name = filepath.ToSlash(rel)
			}
		}
		prefix := name
		for i := 2; used[prefix]; i++ {
			prefix = fmt.Sprintf("%s-%d", name, i)
		}
		used[prefix] = true
		taken, err := bundleDir(dir)
		if err != nil {
			return err
		}
		for rel, b := range taken {
			if rel == results.SummaryFile {
				var s results.Summary
				if err := json.Unmarshal(b, &s); err == nil {
					endpoints = append(endpoints, s.Cluster.Endpoints...)
					s.Command = redactCommand(s.Command)
					if b, err = rewriteCommand(b, s.Command); err != nil {
						return fmt.Errorf("bundle %s: %w", dir, err)
					}
					if len(s.Config) > 0 {
						add(prefix+"/scenario.json", append(bytes.Clone(s.Config), '\n'))
					}
					if len(s.Command) > 0 {
						fmt.Fprintf(&readme, "\n%s: seed %d; re-run with:\n  %s\n", prefix, s.Seed, shellJoin(s.Command))
					}
				}
			}
			add(prefix+"/"+rel, b)
		}
	}
	add("README.txt", []byte(readme.String()))
	replacer := endpointReplacer(endpoints)
	sort.Strings(names)
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	now := time.Now()
	for _, name := range names {
		b := files[name]
		if opts.Redact && replacer != nil {
			b = []byte(replacer.Replace(string(b)))
		}
		if loc := keyMaterial.FindIndex(b); loc != nil {
			return fmt.Errorf("bundle: %s holds key material or a secret (%q): not bundled", name, clip(b[loc[0]:loc[1]]))
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		if _, err := tw.Write(b); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return zw.Close()
}

// bundleDir reads the bundled files of dir, by path relative to it.
func bundleDir(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, sub := range []string{".", "histograms", "hgrm"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			name := e.Name()
			if !(sub == "." && slices.Contains(bundled, name)) && !slices.Contains(bundledExt, filepath.Ext(name)) {
				continue
			}
			rel := filepath.ToSlash(filepath.Join(sub, name))
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				return nil, fmt.Errorf("bundle: %w", err)
			}
			out[rel] = b
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bundle: %s: nothing to bundle (not a run or comparison directory)", dir)
	}
	return out, nil
}

// redactCommand replaces the values of secret flags ("--password x", "--auth-token=x").
func redactCommand(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		name, _, hasValue := strings.Cut(out[i], "=")
		if !secretFlag.MatchString(name) {
			continue
		}
		if hasValue {
			out[i] = name + "=REDACTED"
		} else if i+1 < len(out) {
			out[i+1] = "REDACTED"
			i++
		}
	}
	return out
}

// rewriteCommand replaces the "command" of a summary.json, keeping every other field as written.
func rewriteCommand(b []byte, command []string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if _, ok := m["command"]; !ok {
		return b, nil
	}
	c, err := json.Marshal(command)
	if err != nil {
		return nil, err
	}
	m["command"] = c
	out, err := json.MarshalIndent(m, "", "  ")
	return append(out, '\n'), err
}

// endpointReplacer replaces every endpoint, as a URL, host:port and host, by endpoint-N (longest first,
// so that a URL is replaced whole).
func endpointReplacer(endpoints []string) *strings.Replacer {
	seen := map[string]string{}
	var forms []string
	n := 0
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			u = &url.URL{Host: ep}
		}
		if _, ok := seen[u.Host]; ok {
			continue
		}
		n++
		name := fmt.Sprintf("endpoint-%d", n)
		for _, f := range []string{ep, u.Host} {
			if f != "" {
				if _, ok := seen[f]; !ok {
					seen[f] = name
					forms = append(forms, f)
				}
			}
		}
	}
	if len(forms) == 0 {
		return nil
	}
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	var pairs []string
	for _, f := range forms {
		pairs = append(pairs, f, seen[f])
	}
	return strings.NewReplacer(pairs...)
}

// commonParent is the deepest directory that holds every one of dirs (absolute; "" when unknown).
func commonParent(dirs []string) string {
	var common []string
	for i, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return ""
		}
		parts := strings.Split(filepath.Dir(filepath.Clean(abs)), string(filepath.Separator))
		if i == 0 {
			common = parts
			continue
		}
		n := 0
		for n < len(common) && n < len(parts) && common[n] == parts[n] {
			n++
		}
		common = common[:n]
	}
	if len(common) == 0 {
		return ""
	}
	return strings.Join(common, string(filepath.Separator)) + string(filepath.Separator)
}

func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$\\|&;<>()*?[]{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
