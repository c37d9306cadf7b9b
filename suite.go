package chaosbench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

// SuiteKey is the top-level key of a scenario file that holds its suite metadata. It sits beside the run's
// settings in a block of its own, so that the settings stay exactly the flags of `chaosbench run` (and
// `chaosbench run --config FILE` runs the same file, ignoring the block):
//
//	name: nightly-leader-faults   # the scenario's name (a setting: --name); default the file's base name
//	workload: txn-put
//	...
//	suite:
//	  tags: [nightly, long]       # what --tags selects: nightly, smoke, versions, long, ...
//	  seed-policy: fresh          # fresh: a new seed every time (default); fixed: the file's seed
//	  retry-harness: true         # a harness error is retried once even without --retry-harness
//	  issue: etcd-io/etcd#14370   # a regression scenario: the upstream issue it reproduces,
//	  affected: v3.5.4            # the etcd release (or pseudo-version) that had the bug,
//	  expect: [violation]         # what catches it there (outcome kinds),
//	  fixed: v3.5.5               # and the release that fixed it (suite --affected, --fixed)
const SuiteKey = "suite"

// Seed policies of a suite scenario.
const (
	// SeedFresh gives the scenario a new seed every time the suite runs it (printed and stored, so that the
	// run can be replayed).
	SeedFresh = "fresh"
	// SeedFixed runs the scenario with the seed its file gives, every time.
	SeedFixed = "fixed"
)

// SuiteEntry is one scenario of a suite's registry: a scenario file with its metadata.
type SuiteEntry struct {
	Name         string
	File         string
	Tags         []string
	SeedPolicy   string
	RetryHarness bool
	// Issue, Affected, Expect and Fixed make the entry a regression scenario of a known bug: the etcd
	// release that had it, the outcome kinds that catch it there, the release that fixed it.
	Issue    string
	Affected string
	Expect   []outcome.Kind
	Fixed    string
	// Scenario is the file's scenario, with the suite's settings (SuiteOptions.Set) over it.
	Scenario Scenario
}

// Which release a suite runs its regression scenarios on (SuiteOptions.Release).
const (
	// ReleaseAffected runs every regression scenario on the release that had its bug, where it must be
	// caught with the kind of finding it expects.
	ReleaseAffected = "affected"
	// ReleaseFixed runs every regression scenario on the release that fixed its bug, where it must pass.
	ReleaseFixed = "fixed"
)

// SuiteOptions is what `chaosbench suite` runs.
type SuiteOptions struct {
	// Paths are scenario files and directories of them (*.yaml and *.yml, not recursive).
	Paths []string
	// Out is the suite directory; each scenario runs in a directory of its name under it (default
	// results/<time>-suite).
	Out string
	// Tags selects the scenarios having any of these tags (all when empty).
	Tags []string
	// Only selects the scenarios of these names.
	Only []string
	// Shard is "I/N": of the selected scenarios sorted by name, those at positions I, I+N, I+2N, ...
	// (1-based), so that the N shards together run every scenario exactly once.
	Shard string
	// Seed is the seed of every scenario; 0 follows each scenario's seed policy.
	Seed int64
	// Set holds name=value settings (the flags of `chaosbench run`) applied to every scenario over its
	// file, e.g. etcd-version=v3.5.21 for a CI matrix over versions.
	Set []string
	// RetryHarness retries a scenario once when its outcome is a harness error. A violation, a failed
	// threshold or an undecided check is never retried.
	RetryHarness bool
	// List prints the selected scenarios and runs nothing.
	List bool
	// Release, when set (ReleaseAffected or ReleaseFixed), selects the regression scenarios (those naming
	// an affected release) and runs each on that release of its bug instead of its file's etcd-version.
	Release string
}

// tagPattern is what a tag may look like: it is typed on command lines and in CI files.
var tagPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// LoadSuite reads the scenario files of paths, directories expanded in name order, each with set applied
// over it. Every problem (an unreadable or invalid file, two scenarios of one name) is a usage error.
func LoadSuite(paths []string, set []string) ([]SuiteEntry, error) {
	if len(paths) == 0 {
		return nil, outcome.Usagef("give scenario files or directories of them")
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, outcome.Usagef("%v", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, _ := filepath.Glob(filepath.Join(p, pat))
			found = append(found, m...)
		}
		if len(found) == 0 {
			return nil, outcome.Usagef("%s: no scenario files (*.yaml)", p)
		}
		slices.Sort(found)
		files = append(files, found...)
	}
	var entries []SuiteEntry
	byName := map[string]string{}
	for _, f := range files {
		e, err := loadSuiteEntry(f, set)
		if err != nil {
			return nil, err
		}
		if other, ok := byName[e.Name]; ok {
			return nil, outcome.Usagef("%s: scenario name %q is also %s's; names must be unique", f, e.Name, other)
		}
		byName[e.Name] = f
		entries = append(entries, e)
	}
	return entries, nil
}

// loadSuiteEntry reads one scenario file: its settings as `chaosbench run --config` reads them (set first,
// so that it overrides the file), and its suite block.
func loadSuiteEntry(path string, set []string) (SuiteEntry, error) {
	e := SuiteEntry{File: path, SeedPolicy: SeedFresh, Scenario: DefaultScenario()}
	fs := pflag.NewFlagSet("suite", pflag.ContinueOnError)
	BindFlags(fs, &e.Scenario)
	for _, kv := range set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || fs.Lookup(k) == nil || k == "out" {
			return e, outcome.Usagef("--set %q: expected name=value with a setting of chaosbench run (not out)", kv)
		}
		if err := fs.Set(k, v); err != nil {
			return e, outcome.Usagef("--set %s: %v", kv, err)
		}
	}
	if err := LoadScenarioFile(path, fs); err != nil {
		return e, err
	}
	if err := readSuiteBlock(path, &e); err != nil {
		return e, err
	}
	e.Name = e.Scenario.Name
	if e.Name == "" {
		e.Name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".yaml"), ".yml")
		e.Scenario.Name = e.Name
	}
	if e.SeedPolicy == SeedFixed && e.Scenario.Seed == 0 {
		return e, outcome.Usagef("%s: seed-policy fixed needs a seed (the seed key)", path)
	}
	if err := e.Scenario.validate(); err != nil {
		return e, fmt.Errorf("%s: %w", path, err)
	}
	// The fault schedule is checked against the cluster it targets, as Run checks it, so that a suite
	// refuses a bad scenario before it has run the others.
	if _, err := planFaults(&e.Scenario); err != nil {
		return e, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}

// readSuiteBlock reads the suite block of a scenario file into e. Unknown keys are usage errors, as
// misspelled settings are.
func readSuiteBlock(path string, e *SuiteEntry) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return outcome.Usagef("%v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil // LoadScenarioFile has said what is wrong with it
	}
	root := doc.Content[0]
	var block *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == SuiteKey {
			block = root.Content[i+1]
		}
	}
	if block == nil {
		return nil
	}
	if block.Kind != yaml.MappingNode {
		return outcome.Usagef("%s:%d: suite: expected a mapping (tags, seed-policy, retry-harness)", path, block.Line)
	}
	keys := []string{"tags", "seed-policy", "retry-harness", "issue", "affected", "expect", "fixed"}
	for i := 0; i+1 < len(block.Content); i += 2 {
		k, v := block.Content[i], block.Content[i+1]
		where := fmt.Sprintf("%s:%d: suite", path, k.Line)
		switch k.Value {
		case "tags":
			if err := v.Decode(&e.Tags); err != nil {
				return outcome.Usagef("%s: tags: expected a list of tags", where)
			}
			for _, t := range e.Tags {
				if !tagPattern.MatchString(t) {
					return outcome.Usagef("%s: tag %q: lower-case letters, digits and dashes", where, t)
				}
			}
		case "seed-policy":
			if v.Value != SeedFresh && v.Value != SeedFixed {
				return outcome.Usagef("%s: seed-policy %q: fixed or fresh", where, v.Value)
			}
			e.SeedPolicy = v.Value
		case "retry-harness":
			if err := v.Decode(&e.RetryHarness); err != nil {
				return outcome.Usagef("%s: retry-harness: expected true or false", where)
			}
		case "issue", "affected", "fixed":
			if v.Kind != yaml.ScalarNode || v.Value == "" {
				return outcome.Usagef("%s: %s: expected one value", where, k.Value)
			}
			*map[string]*string{"issue": &e.Issue, "affected": &e.Affected, "fixed": &e.Fixed}[k.Value] = v.Value
		case "expect":
			var kinds []string
			if err := v.Decode(&kinds); err != nil || len(kinds) == 0 {
				return outcome.Usagef("%s: expect: expected a list of outcome kinds", where)
			}
			for _, kind := range kinds {
				if !outcome.Kind(kind).Severe() {
					return outcome.Usagef("%s: expect: %q: a regression is caught as %s or %s", where, kind, outcome.Violation, outcome.MemberCrashed)
				}
				e.Expect = append(e.Expect, outcome.Kind(kind))
			}
		default:
			if s := outcome.Suggest(k.Value, keys); s != "" {
				return outcome.Usagef("%s: unknown key %q (did you mean %q?)", where, k.Value, s)
			}
			return outcome.Usagef("%s: unknown key %q (%s)", where, k.Value, strings.Join(keys, ", "))
		}
	}
	if (e.Affected != "") != (e.Fixed != "") || (e.Affected != "") != (len(e.Expect) > 0) {
		return outcome.Usagef("%s: suite: a regression scenario names its affected release, what catches it there (expect) and its fixed release, all three", path)
	}
	return nil
}

// ParseShard parses "I/N" (1 <= I <= N).
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, outcome.Usagef("--shard %q: I/N with 1 <= I <= N, e.g. 2/3", s)
	}
	return i, n, nil
}

// SelectSuite returns the entries the options select, sorted by name: those with any of opts.Tags, of
// opts.Only's names, in opts.Shard. Selecting nothing is a usage error (a misspelled tag, most likely).
func SelectSuite(entries []SuiteEntry, opts SuiteOptions) ([]SuiteEntry, error) {
	for _, name := range opts.Only {
		if !slices.ContainsFunc(entries, func(e SuiteEntry) bool { return e.Name == name }) {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name)
			}
			if s := outcome.Suggest(name, names); s != "" {
				return nil, outcome.Usagef("--only %q: no such scenario (did you mean %q?)", name, s)
			}
			return nil, outcome.Usagef("--only %q: no such scenario", name)
		}
	}
	var sel []SuiteEntry
	for _, e := range entries {
		if len(opts.Tags) > 0 && !slices.ContainsFunc(opts.Tags, func(t string) bool { return slices.Contains(e.Tags, t) }) {
			continue
		}
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, e.Name) {
			continue
		}
		if opts.Release != "" && e.Affected == "" {
			continue
		}
		sel = append(sel, e)
	}
	slices.SortFunc(sel, func(a, b SuiteEntry) int { return strings.Compare(a.Name, b.Name) })
	if opts.Shard != "" {
		i, n, err := ParseShard(opts.Shard)
		if err != nil {
			return nil, err
		}
		var shard []SuiteEntry
		for k, e := range sel {
			if k%n == i-1 {
				shard = append(shard, e)
			}
		}
		// An empty shard is not an error: a matrix may have more shards than a tag has scenarios.
		return shard, nil
	}
	if len(sel) == 0 && opts.Release != "" {
		return nil, outcome.Usagef("--%s: no selected scenario names an affected release (suite: affected)", opts.Release)
	}
	if len(sel) == 0 {
		return nil, outcome.Usagef("no scenario has the tags %s", strings.Join(opts.Tags, ","))
	}
	return onRelease(sel, opts)
}

// onRelease moves each regression scenario of sel to the release opts.Release names, reading its file
// again with etcd-version set over it, as --set etcd-version would.
func onRelease(sel []SuiteEntry, opts SuiteOptions) ([]SuiteEntry, error) {
	switch opts.Release {
	case "":
		return sel, nil
	case ReleaseAffected, ReleaseFixed:
	default:
		return nil, outcome.Usagef("release %q: %s or %s", opts.Release, ReleaseAffected, ReleaseFixed)
	}
	for _, kv := range opts.Set {
		if strings.HasPrefix(kv, "etcd-version=") {
			return nil, outcome.Usagef("--%s runs each scenario on its own release: drop --set %s", opts.Release, kv)
		}
	}
	out := make([]SuiteEntry, len(sel))
	for i, e := range sel {
		v := e.Affected
		if opts.Release == ReleaseFixed {
			v = e.Fixed
		}
		moved, err := loadSuiteEntry(e.File, append(slices.Clone(opts.Set), "etcd-version="+v))
		if err != nil {
			return nil, err
		}
		out[i] = moved
	}
	return out, nil
}

// ShouldRetry decides whether a scenario's attempt is run again: only a harness error, only when retries
// are allowed, and only once. A violation is never retried, whatever else went wrong in the run (its
// outcome is a violation by precedence), nor is a failed threshold or an undecided check: they are what
// the suite exists to report.
func ShouldRetry(o outcome.Outcome, allowed bool, attempts int) bool {
	return allowed && attempts == 1 && o.Kind == outcome.HarnessError
}

// seedFor is the seed of a scenario's run: the suite's, the file's (fixed), or a fresh one.
func seedFor(e SuiteEntry, suiteSeed int64) int64 {
	switch {
	case suiteSeed != 0:
		return suiteSeed
	case e.SeedPolicy == SeedFixed:
		return e.Scenario.Seed
	}
	return newSeed()
}

// ReplayArgs is the command line that runs a suite scenario again exactly: its file, its seed and the
// suite's settings. The etcd versions are the file's or the settings'.
func ReplayArgs(file string, seed int64, set []string) []string {
	args := []string{"chaosbench", "run", "--config", file, "--seed", strconv.FormatInt(seed, 10)}
	for _, kv := range set {
		args = append(args, "--"+kv)
	}
	return args
}

// releaseSet is the suite's settings as a scenario ran with them: with its release when the suite moved it.
func releaseSet(e SuiteEntry, opts SuiteOptions) []string {
	if opts.Release == "" {
		return opts.Set
	}
	return append(slices.Clone(opts.Set), "etcd-version="+e.Scenario.EtcdVersion)
}

// ShellJoin quotes args for a POSIX shell, so that a printed command can be pasted.
func ShellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r))
		}) {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// Suite runs the selected scenarios one after the other, each in its own run directory under the suite
// directory, and writes suite.json, junit.xml, suite.md and suite.html there (after every scenario, so
// that an interrupted suite leaves what it did). Usage errors (in any selected file) start nothing. The
// error carries the suite's outcome, decided from the scenarios' outcomes, and so its exit code.
func Suite(ctx context.Context, opts SuiteOptions, env Env) (*results.Suite, error) {
	if env.Out == nil {
		env.Out = io.Discard
	}
	if opts.Shard != "" {
		if _, _, err := ParseShard(opts.Shard); err != nil {
			return nil, err
		}
	}
	entries, err := LoadSuite(opts.Paths, opts.Set)
	if err != nil {
		return nil, err
	}
	sel, err := SelectSuite(entries, opts)
	if err != nil {
		return nil, err
	}
	if opts.List {
		for _, e := range sel {
			fmt.Fprintf(env.Out, "%s\t%s\t%s\tseed %s", e.Name, e.File, strings.Join(e.Tags, ","), e.SeedPolicy)
			if e.Affected != "" {
				fmt.Fprintf(env.Out, "\t%s: affected %s (expect %v), fixed %s; runs on %s", e.Issue, e.Affected, e.Expect, e.Fixed, cmp.Or(e.Scenario.EtcdVersion, "builtin"))
			}
			fmt.Fprintln(env.Out)
		}
		return nil, nil
	}
	suite, dir, err := newSuite(opts, env, len(entries))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(env.Out, "chaosbench suite: %d of %d scenarios; results: %s\n", len(sel), len(entries), dir)
	var writeErrs []error
	for i, e := range sel {
		if ctx.Err() != nil {
			suite.Scenarios = append(suite.Scenarios, results.SuiteScenario{
				Name: e.Name, File: e.File, Tags: e.Tags, SeedPolicy: e.SeedPolicy,
				Outcome: outcome.Incomplete,
				Reasons: []outcome.Reason{outcome.New(outcome.Incomplete, "not run: the suite was interrupted")},
			})
			continue
		}
		seed := seedFor(e, opts.Seed)
		policy := e.SeedPolicy
		if opts.Seed != 0 {
			policy = "--seed"
		}
		fmt.Fprintf(env.Out, "\n=== [%d/%d] %s (%s): seed %d (%s)\n", i+1, len(sel), e.Name, e.File, seed, policy)
		senv := env // the load's bar says which scenario runs and how many are left
		senv.ProgressLabel = fmt.Sprintf("[%d/%d] %s", i+1, len(sel), e.Name)
		suite.Scenarios = append(suite.Scenarios, runSuiteScenario(ctx, e, seed, opts, dir, senv))
		writeErrs = writeSuiteFiles(dir, suite)
	}
	writeErrs = writeSuiteFiles(dir, suite)
	writeSuiteText(env.Out, dir, suite)
	o := suite.Verdict()
	if err := errors.Join(writeErrs...); err != nil {
		// The suite's files are its result: not writing them is a harness error of the suite.
		fmt.Fprintln(env.Out, "error:", err)
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "%v", err))...)
		return suite, o.ErrWith(err)
	}
	return suite, o.Err()
}

// newSuite creates the suite's directory and its record of what was selected from how many.
func newSuite(opts SuiteOptions, env Env, registry int) (*results.Suite, string, error) {
	start := time.Now()
	dir := opts.Out
	if dir == "" {
		dir = filepath.Join("results", start.Format("20060102-150405")+"-suite")
	}
	if _, err := os.Stat(filepath.Join(dir, results.SuiteFile)); err == nil {
		return nil, "", outcome.Usagef("--out %s: already holds a suite; choose another directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", outcome.Usagef("--out %s: %v", dir, err)
	}
	suite := &results.Suite{
		Schema: results.SuiteSchema, Command: redactUser(env.Command), Chaosbench: env.Version, Start: start,
		Selection: results.SuiteSelection{
			Paths: opts.Paths, Registry: registry, Tags: opts.Tags, Only: opts.Only, Shard: opts.Shard,
			Seed: opts.Seed, Set: opts.Set, RetryHarness: opts.RetryHarness, Release: opts.Release,
		},
	}
	return suite, dir, nil
}

// writeSuiteFiles decides the suite's outcome so far and writes suite.json and its reports; it runs after
// every scenario, so that an interrupted suite leaves what it did.
func writeSuiteFiles(dir string, suite *results.Suite) []error {
	suite.End = time.Now()
	suite.DurationSeconds = suite.End.Sub(suite.Start).Seconds()
	suite.SetOutcome()
	return []error{results.WriteSuite(dir, suite), report.WriteSuite(dir, suite)}
}

// runSuiteScenario runs entry e with seed into the suite directory, once more into NAME.retry1 when its
// outcome is a harness error that may be retried, and prints its verdict (and how to replay it when it
// did not pass).
func runSuiteScenario(ctx context.Context, e SuiteEntry, seed int64, opts SuiteOptions, dir string, env Env) results.SuiteScenario {
	sc := results.SuiteScenario{
		Name: e.Name, File: e.File, Tags: e.Tags, SeedPolicy: e.SeedPolicy, Seed: seed,
		Replay: ShellJoin(ReplayArgs(e.File, seed, releaseSet(e, opts))),
		Issue:  e.Issue, EtcdVersion: e.Scenario.EtcdVersion,
	}
	began := time.Now()
	for {
		runDir := e.Name
		if len(sc.Attempts) > 0 {
			runDir = fmt.Sprintf("%s.retry%d", e.Name, len(sc.Attempts))
		}
		a, refused := runScenario(ctx, e.Scenario, seed, filepath.Join(dir, runDir), env)
		if a.Dir != "" {
			a.Dir = runDir
		}
		sc.Attempts = append(sc.Attempts, a)
		o := outcome.Outcome{Kind: a.Outcome, Reasons: a.Reasons}
		if ctx.Err() == nil && !refused && ShouldRetry(o, opts.RetryHarness || e.RetryHarness, len(sc.Attempts)) {
			fmt.Fprintf(env.Out, "=== %s: %s; retrying once (--retry-harness), into %s.retry1\n", e.Name, o, e.Name)
			continue
		}
		break
	}
	last := sc.Attempts[len(sc.Attempts)-1]
	sc.Outcome, sc.Reasons, sc.Dir = last.Outcome, last.Reasons, last.Dir
	if opts.Release == ReleaseAffected {
		// On the release that had the bug the scenario must catch it: its verdict is the one judge's
		// verdict of a run that is expected to find something.
		sc.Expect = e.Expect
		o := outcome.Expect(outcome.Outcome{Kind: last.Outcome, Reasons: last.Reasons}, e.Expect)
		sc.Outcome, sc.Reasons = o.Kind, o.Reasons
	}
	sc.DurationSeconds = time.Since(began).Seconds()
	v := sc.Verdict()
	fmt.Fprintf(env.Out, "=== %s: %s (%s)", e.Name, v.Headline(), v.Kind)
	if sc.Retried() {
		fmt.Fprintf(env.Out, " after a retry (attempt 1: %s)", sc.Attempts[0].Outcome)
	}
	fmt.Fprintln(env.Out)
	if !v.Passed() {
		fmt.Fprintf(env.Out, "replay: %s\n", sc.Replay)
	}
	return sc
}

// runScenario runs one attempt of a scenario into dir and returns its outcome: the run's, from its
// summary; a run that wrote no summary (it could not start) is a harness error. refused says the run
// refused the scenario (a usage error no check before it caught): the same settings would be refused
// again, so it is not retried.
func runScenario(ctx context.Context, s Scenario, seed int64, dir string, env Env) (a results.SuiteAttempt, refused bool) {
	s.Out, s.Seed = dir, seed
	began := time.Now()
	sum, err := Run(ctx, s, env)
	a.DurationSeconds = time.Since(began).Seconds()
	if _, statErr := os.Stat(filepath.Join(dir, results.SummaryFile)); statErr == nil {
		a.Dir = dir
	}
	switch {
	case sum != nil:
		o := sum.Verdict()
		a.Outcome, a.Reasons = o.Kind, o.Reasons
	case ctx.Err() != nil:
		a.Outcome = outcome.Incomplete
		a.Reasons = []outcome.Reason{outcome.New(outcome.Incomplete, "interrupted before the run began")}
	case outcome.IsUsage(err):
		// Not a harness error to retry: the same settings would be refused again.
		a.Outcome = outcome.HarnessError
		a.Reasons = []outcome.Reason{outcome.New(outcome.HarnessError, "the scenario was refused: %v", err)}
		refused = true
	default:
		a.Outcome = outcome.HarnessError
		a.Reasons = []outcome.Reason{outcome.New(outcome.HarnessError, "the run could not start: %v", err)}
	}
	return a, refused
}
