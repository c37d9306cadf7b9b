package clusters

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
)

// LabelImageKindWorker marks the containers that run a worker of a split load.
const LabelImageKindWorker = "worker"

// WorkerSpec is a chaosbench process to run as a container on a docker cluster's network: a worker of a
// split load (chaosbench run --workers N --worker-containers).
type WorkerSpec struct {
	// Name tells the container apart: chaosbench-<cluster>-<Name>.
	Name string
	// Args are the arguments of /chaosbench in the builtin image.
	Args []string
	// Binds are host:container bind mounts.
	Binds []string
	// CPUs limits the container's CPU (0: no limit).
	CPUs float64
	// Log is the host file that receives the container's output once it exits.
	Log string
}

// Gateway returns the host's address on the cluster network: what a container dials to reach a server
// on the host (the coordinator of a split load, the peer proxies).
func (c *Docker) Gateway() netip.Addr { return c.gateway }

// WorkerContainer is a running worker container.
type WorkerContainer struct {
	c    *Docker
	id   string
	log  string
	wait client.ContainerWaitResult
}

// StartWorker starts spec in a container of the builtin image (the static chaosbench binary FROM scratch,
// built if missing) on the cluster's network, as the user running chaosbench. The container carries the
// cluster's labels, and the cluster removes it when it closes if it is still there.
func (c *Docker) StartWorker(ctx context.Context, spec WorkerSpec) (*WorkerContainer, error) {
	img, err := ResolveImage(ctx, etcdbuild.Builtin, ImageOptions{Log: c.opts.Log})
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", spec.Name, err)
	}
	if err := CheckStatic(img.Binary); err != nil {
		return nil, err
	}
	if _, err := EnsureImage(ctx, c.docker.Client, img, c.opts.Log); err != nil {
		return nil, fmt.Errorf("worker %s: %w", spec.Name, err)
	}
	labels := map[string]string{LabelImageKind: LabelImageKindWorker}
	for k, v := range c.labels {
		labels[k] = v
	}
	created, err := c.docker.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image: img.Ref, Entrypoint: []string{"/chaosbench"}, Cmd: spec.Args,
			User: fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()), Labels: labels, Hostname: spec.Name,
		},
		HostConfig: &container.HostConfig{
			NetworkMode: container.NetworkMode(c.netName),
			Binds:       spec.Binds,
			Resources:   container.Resources{NanoCPUs: int64(spec.CPUs * 1e9)},
		},
		Name: "chaosbench-" + c.id + "-" + spec.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("worker %s: create container: %w", spec.Name, err)
	}
	c.addStale(created.ID) // removed by Close whatever happens to the worker
	w := &WorkerContainer{c: c, id: created.ID, log: spec.Log}
	w.wait = c.docker.ContainerWait(context.WithoutCancel(ctx), created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := c.docker.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("worker %s: start container: %w", spec.Name, err)
	}
	c.events.Printf("started worker %s: container %s, image %s, cpus %g", spec.Name, created.ID[:12], img.Ref, spec.CPUs)
	return w, nil
}

// Wait waits for the worker to exit, writes its output to its log file and returns its exit status.
func (w *WorkerContainer) Wait(ctx context.Context) (int64, error) {
	var status int64
	select {
	case res := <-w.wait.Result:
		status = res.StatusCode
	case err := <-w.wait.Error:
		return -1, fmt.Errorf("wait for worker container: %w", err)
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rc, err := w.c.docker.ContainerLogs(lctx, w.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return status, fmt.Errorf("worker container logs: %w", err)
	}
	defer rc.Close()
	f, err := os.Create(w.log)
	if err != nil {
		return status, fmt.Errorf("worker container logs: %w", err)
	}
	if _, err := stdcopy.StdCopy(f, f, rc); err != nil {
		f.Close()
		return status, fmt.Errorf("worker container logs: %w", err)
	}
	return status, f.Close()
}

// Signal sends the worker a signal (SIGINT: stop the load and write what it has; SIGKILL).
func (w *WorkerContainer) Signal(ctx context.Context, sig string) error {
	_, err := w.c.docker.ContainerKill(ctx, w.id, client.ContainerKillOptions{Signal: sig})
	if err != nil && !cerrdefs.IsNotFound(err) && !notRunning(err) {
		return fmt.Errorf("signal worker container: %w", err)
	}
	return nil
}
