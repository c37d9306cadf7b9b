package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// healing returns the specs of the faults injected and not healed yet, sorted and comma-separated ("" when
// none): those a leftover found by the final sweep belongs to.
func (r *Runner) healing() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var specs []string
	for _, spec := range r.inEffect {
		if !slices.Contains(specs, spec) {
			specs = append(specs, spec)
		}
	}
	slices.Sort(specs)
	return strings.Join(specs, ",")
}

// healAll is the last line of defence after the schedule's own heals: it lifts every proxy policy,
// resumes paused members and restores disk speed, whatever a lost goroutine may have left behind. Each
// thing it had to heal is a problem (ProblemSweepHealed) naming the faults still being healed then.
func (r *Runner) healAll(ctx context.Context) {
	c := r.env.Cluster
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	spec := r.healing()
	swept := func(format string, args ...any) {
		r.problem(ProblemSweepHealed, spec, fmt.Sprintf(format, args...))
	}
	for _, m := range c.Members() {
		if pc, ok := c.(proxied); ok {
			if p := pc.Proxy(m.Name()); p != nil && p.Heal() {
				swept("peer proxy of %s was still shaped at the end; healed by the final sweep", m.Name())
			}
		}
		if pc, ok := c.(clientProxied); ok {
			if p := pc.ClientProxy(m.Name()); p != nil && p.Heal() {
				swept("client proxy of %s was still shaped at the end; healed by the final sweep", m.Name())
			}
		}
		if d, ok := c.(disked); ok {
			if fs := d.Disk(m.Name()); fs != nil && fs.Delays() != (slowfs.Delays{}) {
				if err := fs.Set(hctx, slowfs.Delays{}); err != nil {
					swept("disk of %s was still slow at the end; the final sweep could not restore it: %v", m.Name(), err)
					continue
				}
				swept("disk of %s was still slow at the end; restored by the final sweep", m.Name())
			}
		}
		if p, ok := m.(clusters.Process); ok && p.Paused() {
			if err := p.Resume(hctx); err != nil {
				swept("%s was still paused at the end; the final sweep could not resume it: %v", m.Name(), err)
				continue
			}
			swept("%s was still paused at the end; resumed by the final sweep", m.Name())
		}
	}
}
