package clusters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
)

// CleanReport says what a clean-up removed, and what it left alone because the chaosbench process that
// owns it still runs (or runs on another host).
type CleanReport struct {
	Containers []string
	Networks   []string
	Volumes    []string
	Images     []string
	Cache      []string
	// Kept describes objects of live runs that were left alone.
	Kept []string
}

// Empty reports whether nothing was removed.
func (r CleanReport) Empty() bool {
	return len(r.Containers)+len(r.Networks)+len(r.Volumes)+len(r.Images)+len(r.Cache) == 0
}

// String lists what was removed, e.g. "3 containers (a, b, c), 1 network (n)".
func (r CleanReport) String() string {
	var parts []string
	add := func(what string, names []string) {
		if len(names) == 0 {
			return
		}
		if len(names) != 1 {
			what += "s"
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s)", len(names), what, strings.Join(names, ", ")))
	}
	add("container", r.Containers)
	add("network", r.Networks)
	add("volume", r.Volumes)
	add("image", r.Images)
	add("cache directory", r.Cache)
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// CleanOptions configures Clean.
type CleanOptions struct {
	// All removes the objects of live chaosbench runs too (and of runs on other hosts sharing the engine).
	All bool
	// Images also removes chaosbench's images (they are rebuilt on demand, in seconds from cached binaries).
	Images bool
	// Cache also removes the cached etcd binaries (rebuilding one takes about a minute).
	Cache bool
}

// Clean removes the containers, networks and volumes that chaosbench runs left behind (runs that were
// killed, or crashed with their watchdog), and optionally images and the binary cache. Objects of runs
// that are still alive stay unless opts.All is set.
func Clean(ctx context.Context, opts CleanOptions) (CleanReport, error) {
	var report CleanReport
	var errs []error
	if opts.Cache {
		if dir, err := etcdbuild.CacheDir(); err == nil {
			if _, err := os.Stat(dir); err == nil {
				if err := os.RemoveAll(dir); err != nil {
					errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
				} else {
					report.Cache = append(report.Cache, dir)
				}
			}
		}
	}
	d, err := DockerClient(ctx)
	if err != nil {
		return report, errors.Join(append(errs, err)...)
	}
	defer d.Close()
	objects, err := removeLabelled(ctx, d.Client, LabelOwned, !opts.All)
	objects.Cache = report.Cache
	report = objects
	errs = append(errs, err)
	if opts.Images {
		list, err := d.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", LabelOwned)})
		if err != nil {
			errs = append(errs, fmt.Errorf("list images: %w", err))
		}
		for _, im := range list.Items {
			name := im.ID
			if len(im.RepoTags) > 0 {
				name = strings.Join(im.RepoTags, ",")
			}
			if _, err := d.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove image %s: %w", name, err))
				continue
			}
			report.Images = append(report.Images, name)
		}
	}
	return report, errors.Join(errs...)
}

// RemoveOrphans removes the containers, networks and volumes of chaosbench processes that are gone, and
// says so on log. Every docker cluster start calls it.
func RemoveOrphans(ctx context.Context, d *client.Client, log io.Writer) (CleanReport, error) {
	report, err := removeLabelled(ctx, d, LabelOwned, true)
	if !report.Empty() && log != nil {
		fmt.Fprintf(log, "removed leftovers of chaosbench runs that died: %s\n", report)
	}
	return report, err
}

// removeLabelled removes the containers, then the networks and volumes, that carry label (key or
// key=value). With orphansOnly, objects whose owner still runs, or whose owner cannot be judged, are kept
// and listed in Kept. Objects that vanish meanwhile are not errors.
func removeLabelled(ctx context.Context, d *client.Client, label string, orphansOnly bool) (CleanReport, error) {
	var report CleanReport
	var errs []error
	filter := make(client.Filters).Add("label", label)
	keep := func(kind, name string, labels map[string]string) bool {
		if !orphansOnly {
			return false
		}
		alive, known := ownerState(labels[LabelOwner])
		switch {
		case alive:
			report.Kept = append(report.Kept, fmt.Sprintf("%s %s of running chaosbench %s", kind, name, ownerPID(labels[LabelOwner])))
			return true
		case !known:
			report.Kept = append(report.Kept, fmt.Sprintf("%s %s of chaosbench on another host (%s)", kind, name, labels[LabelOwner]))
			return true
		}
		return false
	}
	containers, err := d.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		return report, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range containers.Items {
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if keep("container", name, c.Labels) {
			continue
		}
		if err := removeOrphan(ctx, d, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", name, err))
			continue
		}
		report.Containers = append(report.Containers, name)
	}
	networks, err := d.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		return report, errors.Join(append(errs, fmt.Errorf("list networks: %w", err))...)
	}
	for _, n := range networks.Items {
		if keep("network", n.Name, n.Labels) {
			continue
		}
		if _, err := d.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
			continue
		}
		report.Networks = append(report.Networks, n.Name)
	}
	volumes, err := d.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if err != nil {
		return report, errors.Join(append(errs, fmt.Errorf("list volumes: %w", err))...)
	}
	for _, v := range volumes.Items {
		if keep("volume", v.Name, v.Labels) {
			continue
		}
		if _, err := d.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
			continue
		}
		report.Volumes = append(report.Volumes, v.Name)
	}
	return report, errors.Join(errs...)
}

func ownerPID(label string) string {
	if o, ok := parseOwner(label); ok {
		return fmt.Sprintf("pid %d", o.PID)
	}
	return label
}

// removeOrphan removes a container, with its volumes. One that the engine is removing already ("removal of
// container ... is already in progress": its run's own clean-up, cut short by a kill, left the engine at
// it) is waited for until it is gone, up to a minute: it is removed, not an error.
func removeOrphan(ctx context.Context, d *client.Client, id string) error {
	_, err := d.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil || cerrdefs.IsNotFound(err):
		return nil
	case !cerrdefs.IsConflict(err) || !strings.Contains(err.Error(), "already in progress"):
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if _, ierr := d.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); cerrdefs.IsNotFound(ierr) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; still there after waiting: %w", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
