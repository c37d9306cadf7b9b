package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// failpointAction is a failpoint entry's value: which gofail failpoint, and what it does when reached.
type failpointAction struct {
	name string
	// alternatives are the names NAME|NAME2|... gave, in order: the first one the members' build has is
	// armed (CheckFailpoints picks it). A code point that moved between releases, under another name, is
	// then one spec on every release of it.
	alternatives []string
	count        int           // 0: every time the point is reached; n: the first n times
	panic        bool          // the member panics at the point
	sleep        time.Duration // or stalls there this long
}

// term is the action as gofail's HTTP endpoint takes it: "panic", "sleep(200)" (milliseconds), "2*panic".
func (a failpointAction) term() string {
	t := "panic"
	if !a.panic {
		t = fmt.Sprintf("sleep(%d)", a.sleep.Milliseconds())
	}
	if a.count > 0 {
		t = strconv.Itoa(a.count) + "*" + t
	}
	return t
}

// parseFailpoint parses NAME:ACTION, where ACTION is panic or sleep(DURATION), optionally N* before it.
func parseFailpoint(v string) (failpointAction, error) {
	name, action, ok := strings.Cut(v, ":")
	name, action = strings.TrimSpace(name), strings.TrimSpace(action)
	if !ok || name == "" || action == "" {
		return failpointAction{}, fmt.Errorf("failpoint needs NAME:ACTION, e.g. failpoint:leader=raftBeforeSave:panic or =beforeCommit:sleep(200ms)")
	}
	a := failpointAction{name: name}
	if strings.Contains(name, "|") {
		for _, n := range strings.Split(name, "|") {
			if n = strings.TrimSpace(n); n == "" {
				return failpointAction{}, fmt.Errorf("failpoint %q: names separated by |, none empty", name)
			}
			a.alternatives = append(a.alternatives, n)
		}
		a.name = a.alternatives[0]
	}
	if n, rest, ok := strings.Cut(action, "*"); ok {
		c, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || c < 1 {
			return failpointAction{}, fmt.Errorf("failpoint count %q: a positive number, as in 2*panic", n)
		}
		a.count, action = c, strings.TrimSpace(rest)
	}
	switch {
	case action == "panic":
		a.panic = true
	case strings.HasPrefix(action, "sleep(") && strings.HasSuffix(action, ")"):
		arg := strings.TrimSuffix(strings.TrimPrefix(action, "sleep("), ")")
		d, err := time.ParseDuration(arg)
		if err != nil {
			ms, nerr := strconv.Atoi(arg)
			if nerr != nil {
				return failpointAction{}, fmt.Errorf("failpoint sleep(%s): a duration such as 200ms", arg)
			}
			d = time.Duration(ms) * time.Millisecond
		}
		if d < time.Millisecond {
			return failpointAction{}, fmt.Errorf("failpoint sleep(%s): at least 1ms", arg)
		}
		a.sleep = d
	default:
		return failpointAction{}, fmt.Errorf("failpoint action %q: panic or sleep(DURATION), optionally N* before it", action)
	}
	return a, nil
}

// CheckFailpoints checks the failpoint names of the schedule against those the members' builds have (the
// failpoints every member has, for mixed releases): an unknown name is a usage error listing them.
func (s Schedule) CheckFailpoints(have []string) error {
	for i, e := range s.Entries {
		if e.Kind != KindFailpoint {
			continue
		}
		fp := &s.Entries[i].params.failpoint
		if j := slices.IndexFunc(fp.alternatives, func(n string) bool { return slices.Contains(have, n) }); j >= 0 {
			fp.name = fp.alternatives[j]
		}
		if slices.Contains(have, fp.name) {
			continue
		}
		msg := fmt.Sprintf("--faults %q: the members' etcd has no failpoint %q", e.Spec, strings.Join(append([]string{fp.name}, fp.alternatives...), "|"))
		if len(fp.alternatives) > 0 {
			msg = fmt.Sprintf("--faults %q: the members' etcd has none of the failpoints %s", e.Spec, strings.Join(fp.alternatives, ", "))
		}
		if sug := outcome.Suggest(fp.name, have); sug != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", sug)
		}
		return outcome.Usagef("%s; it has %s", msg, strings.Join(have, ", "))
	}
	return nil
}

// failpointed is a cluster whose members serve gofail endpoints (clusters.Embedded with Failpoints).
type failpointed interface {
	FailpointURL(member string) string
	ExpectCrash(member string, expect bool)
	StoppedByFault(member string) bool
}

// Failpoint arms a gofail failpoint on its targets for the window and disarms it when the window ends.
// A member armed to panic crashes when it reaches the point; Recover starts it again on its data. A
// failpoint that no target reached is reported (NotFired): a fault that did not happen is never fine.
type Failpoint struct {
	base
	armed []clusters.Process
	pids  map[string]int // per armed target, the process the failpoint was armed in
	fired []string       // per target, what happened: "beforeCommit fired 3 times on m1", "m2 panicked at ..."
	// restarted are the armed targets another fault stopped or restarted during the window (a kill): the failpoint
	// went with the process it was armed in, and whether it was reached there is unknown.
	restarted []string
	hits      map[string]int // per target, how often its action ran (gofail's count)
	panicked  []string
}

// Available needs process control and members serving their failpoints.
func (f *Failpoint) Available(c clusters.Cluster) error {
	if _, err := processes(c); err != nil {
		return err
	}
	fc, ok := c.(failpointed)
	if !ok || len(c.Members()) == 0 || fc.FailpointURL(c.Members()[0].Name()) == "" {
		return errors.New("the members serve no failpoints: start the cluster from a release with --failpoints")
	}
	return nil
}

// Inject arms the failpoint on every target.
func (f *Failpoint) Inject(ctx context.Context) error {
	if err := f.resolve(ctx, running(f.env.Cluster)); err != nil {
		return err
	}
	fc := f.env.Cluster.(failpointed)
	a := f.p.failpoint
	var errs []error
	f.pids = map[string]int{}
	for _, m := range f.targets {
		p := m.(clusters.Process)
		if a.panic {
			fc.ExpectCrash(p.Name(), true)
		}
		if _, err := failpointRequest(ctx, http.MethodPut, fc.FailpointURL(p.Name())+"/"+a.name, a.term()); err != nil {
			fc.ExpectCrash(p.Name(), false)
			errs = append(errs, fmt.Errorf("arm %s on %s: %w", a.name, p.Name(), err))
			continue
		}
		f.armed = append(f.armed, p)
		f.pids[p.Name()] = p.PID()
	}
	return errors.Join(errs...)
}

// Recover disarms the failpoint where the member still runs (reading how often its action ran first) and
// starts the members it crashed.
func (f *Failpoint) Recover(ctx context.Context) error {
	fc := f.env.Cluster.(failpointed)
	a := f.p.failpoint
	var errs []error
	f.hits = map[string]int{}
	for _, p := range f.armed {
		url := fc.FailpointURL(p.Name()) + "/" + a.name
		// A member armed to panic may reach the point as the window ends: its endpoint goes before its
		// process does, so a request that fails is a panic if the process exits right after.
		dying := func() bool { return a.panic && exitsWithin(ctx, p, 3*time.Second) }
		if pid := p.PID(); pid != 0 && pid != f.pids[p.Name()] {
			// Another fault (a kill) restarted the member inside the window: the new process never had
			// the failpoint armed, so there is nothing to disarm and no count to read.
			f.fired = append(f.fired, fmt.Sprintf("%s restarted during the window (pid %d, now %d), which cleared %s", p.Name(), f.pids[p.Name()], pid, a.name))
			f.restarted = append(f.restarted, p.Name())
			if a.panic {
				fc.ExpectCrash(p.Name(), false)
			}
			continue
		}
		if p.Running() {
			count, gerr := failpointRequest(ctx, http.MethodGet, url+"/count", "")
			_, derr := failpointRequest(ctx, http.MethodDelete, url, "") // disarm even when the count is unknown
			if err := errors.Join(gerr, derr); err == nil || !dying() {
				n, _ := strconv.Atoi(strings.TrimSpace(count))
				f.hits[p.Name()] = n
				f.fired = append(f.fired, fmt.Sprintf("%s fired %d times on %s", a.name, n, p.Name()))
				if err != nil {
					errs = append(errs, fmt.Errorf("read and disarm %s on %s: %w", a.name, p.Name(), err))
				}
				if a.panic {
					fc.ExpectCrash(p.Name(), false)
				}
				continue
			}
		}
		if !a.panic || fc.StoppedByFault(p.Name()) {
			// Not armed to panic, or its exit was asked for: another fault stopped it (a kill whose window
			// is still open). That fault starts it again, and the failpoint went with the process.
			f.fired = append(f.fired, fmt.Sprintf("%s was down at the window's end (another fault stopped it), which cleared %s", p.Name(), a.name))
			f.restarted = append(f.restarted, p.Name())
			continue
		}
		f.fired = append(f.fired, p.Name()+" panicked at "+a.name)
		f.hits[p.Name()] = 1
		f.panicked = append(f.panicked, p.Name())
		if err := p.Start(ctx); err != nil {
			errs = append(errs, fmt.Errorf("start %s after its panic: %w", p.Name(), err))
		}
	}
	if len(f.fired) > 0 {
		f.env.logf("fault %s: %s", f.name, strings.Join(f.fired, ", "))
	}
	return errors.Join(errs...)
}

// exitsWithin reports whether p's process has exited, or exits within d.
func exitsWithin(ctx context.Context, p clusters.Process, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for p.Running() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// NotFired says why the fault did not happen ("" when it did): no target reached the failpoint (gofail
// counts the actions it ran, so a target that reached it ran its action at least once).
func (f *Failpoint) NotFired() string {
	reached := 0
	for _, n := range f.hits {
		reached += n
	}
	if len(f.armed) == 0 || reached > 0 {
		return ""
	}
	if len(f.restarted) > 0 {
		return fmt.Sprintf("failpoint %s: whether it was reached is unknown: another fault stopped or restarted %s during the window, which cleared it", f.p.failpoint.name, strings.Join(f.restarted, ","))
	}
	return fmt.Sprintf("failpoint %s was armed on %s but never reached during the window", f.p.failpoint.name, strings.Join(names(f.targets), ","))
}

// Effect is what the failpoint did on each target, from its gofail counts and the members it crashed.
func (f *Failpoint) Effect() *results.Effect {
	if len(f.armed) == 0 {
		return nil
	}
	return &results.Effect{Detail: strings.Join(f.fired, ", "), Hits: f.hits, Panicked: f.panicked}
}

// failpointRequest sends one request to a gofail endpoint and returns its body; anything but 2xx is an
// error with gofail's message.
func failpointRequest(ctx context.Context, method, url, body string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
