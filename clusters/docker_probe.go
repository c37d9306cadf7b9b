package clusters

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
)

// ContainerProbe describes a command of the chaosbench binary run in a one-off container that sees a host
// directory exactly as a docker member sees its data directory: bind-mounted, as the user running
// chaosbench, with the limits given (a disk probe runs without the members' CPU limit: a throttled probe
// would measure the CPU quota, not the disk).
type ContainerProbe struct {
	// HostDir is bind-mounted at ContainerProbeDir.
	HostDir string
	// CPUs and Memory are the members' limits (0: none).
	CPUs   float64
	Memory int64
	// Args follow the chaosbench binary ("qualify", "disk", "--dir", ContainerProbeDir, ...).
	Args []string
	// Image configures how the builtin image (the static chaosbench binary FROM scratch) is found or built.
	Image ImageOptions
	// Log receives the image build's progress lines.
	Log io.Writer
}

// ContainerProbeDir is where a ContainerProbe's HostDir appears inside its container.
const ContainerProbeDir = "/data"

// RunContainerProbe runs p's command in a container of the builtin image, waits for it, removes it, and
// returns its output; an exit status other than 0 is returned with that output as ContainerExitError.
// The container is labelled with its owner like a cluster's containers, so that if chaosbench is killed
// meanwhile, `chaosbench clean` and the next docker run remove it.
func RunContainerProbe(ctx context.Context, p ContainerProbe) ([]byte, error) {
	host, err := filepath.Abs(p.HostDir)
	if err != nil {
		return nil, err
	}
	img, err := ResolveImage(ctx, etcdbuild.Builtin, p.Image)
	if err != nil {
		return nil, fmt.Errorf("container probe: %w", err)
	}
	d, err := DockerClient(ctx)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if _, err := EnsureImage(ctx, d.Client, img, p.Log); err != nil {
		return nil, fmt.Errorf("container probe: %w", err)
	}
	created, err := d.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image: img.Ref, Entrypoint: []string{"/chaosbench"}, Cmd: p.Args,
			User:   fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
			Labels: map[string]string{LabelOwned: "true", LabelOwner: selfOwner().String(), LabelImageKind: "probe"},
		},
		HostConfig: &container.HostConfig{
			Binds:     []string{host + ":" + ContainerProbeDir},
			Resources: container.Resources{NanoCPUs: int64(p.CPUs * 1e9), Memory: p.Memory, MemorySwap: memorySwap(p.Memory)},
		},
		Name: "chaosbench-probe-" + newClusterID(),
	})
	if err != nil {
		return nil, fmt.Errorf("container probe: create: %w", err)
	}
	id := created.ID
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := d.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			fmt.Fprintf(logOrDiscard(p.Log), "container probe: remove %s: %v\n", id[:12], err)
		}
	}()
	wait := d.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := d.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("container probe: start: %w", err)
	}
	var status int64
	select {
	case res := <-wait.Result:
		status = res.StatusCode
	case err := <-wait.Error:
		return nil, fmt.Errorf("container probe: wait: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	rc, err := d.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, fmt.Errorf("container probe: logs: %w", err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		return nil, fmt.Errorf("container probe: logs: %w", err)
	}
	if status != 0 {
		return out.Bytes(), &ContainerExitError{Status: status, Output: out.String()}
	}
	return out.Bytes(), nil
}

// ContainerExitError is a probe command that exited with a status other than 0.
type ContainerExitError struct {
	Status int64
	Output string
}

func (e *ContainerExitError) Error() string {
	return fmt.Sprintf("container probe exited with status %d", e.Status)
}

// IsContainerExit reports whether err is a probe's non-zero exit, and its status.
func IsContainerExit(err error) (int64, bool) {
	var e *ContainerExitError
	if errors.As(err, &e) {
		return e.Status, true
	}
	return 0, false
}

// memorySwap is the swap limit that goes with a memory limit: none beyond it (as members have).
func memorySwap(memory int64) int64 {
	if memory > 0 {
		return memory
	}
	return 0
}

func logOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
