package kubenode

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/moby/moby/client"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// importImages makes the node's pause image from the first image (its /chaosbench, run as
// PauseCommand: the same layers, another entry point), saves it and every image from the local Docker
// engine and imports them into the node's containerd, where the CRI finds them by name.
func (n *Node) importImages(ctx context.Context) error {
	began := time.Now()
	d, err := clusters.DockerClient(ctx)
	if err != nil {
		return fmt.Errorf("start node: import images: %w", err)
	}
	defer d.Close()
	if err := buildPause(ctx, d.Client, n.opts.Images[0]); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	refs := append([]string{PauseImage}, n.opts.Images...)
	tarPath := filepath.Join(n.opts.Dir, "images.tar")
	if err := saveImages(ctx, d.Client, refs, tarPath); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	defer os.Remove(tarPath)
	if _, err := n.ctr(ctx, "images", "import", tarPath); err != nil {
		return fmt.Errorf("start node: import images: %w", err)
	}
	out, err := n.ctr(ctx, "images", "ls", "-q")
	if err != nil {
		return fmt.Errorf("start node: import images: %w", err)
	}
	for _, r := range refs {
		// containerd names an image by its full reference: docker.io/library/golang:1.26 for golang:1.26,
		// docker.io/library/golang:latest for golang.
		named, err := reference.ParseNormalizedNamed(r)
		if err != nil {
			return fmt.Errorf("start node: image %s: %w", r, err)
		}
		if !slices.Contains(strings.Fields(out), reference.TagNameOnly(named).String()) {
			return fmt.Errorf("start node: image %s is not in the node's containerd after the import (it has: %s)", r, strings.Join(strings.Fields(out), " "))
		}
	}
	fmt.Fprintf(n.opts.Log, "node: imported %s in %.1fs\n", strings.Join(refs, ", "), time.Since(began).Seconds())
	return nil
}

// buildPause builds PauseImage FROM base with chaosbench's pause command as its entry point.
func buildPause(ctx context.Context, d *client.Client, base string) error {
	dockerfile := fmt.Sprintf("FROM %s\nENTRYPOINT [\"/chaosbench\", %q]\nCMD []\n", base, PauseCommand)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(dockerfile)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := d.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags: []string{PauseImage}, Remove: true, ForceRemove: true,
		Labels: map[string]string{clusters.LabelOwned: "true"},
	})
	if err != nil {
		return fmt.Errorf("build %s from %s: %w", PauseImage, base, err)
	}
	defer res.Body.Close()
	if err := clusters.ReadDockerStream(res.Body); err != nil {
		return fmt.Errorf("build %s from %s: %w", PauseImage, base, err)
	}
	return nil
}

// saveImages writes refs from the Docker engine into one archive at path (docker save).
func saveImages(ctx context.Context, d *client.Client, refs []string, path string) error {
	r, err := d.ImageSave(ctx, refs)
	if err != nil {
		return fmt.Errorf("save images %s: %w", strings.Join(refs, ", "), err)
	}
	defer r.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("save images %s: %w", strings.Join(refs, ", "), err)
	}
	return f.Close()
}
