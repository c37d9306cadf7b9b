package clusters

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"go.etcd.io/etcd/api/v3/version"

	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
)

// ImageRepo is the repository of every image chaosbench builds: chaosbench/etcd:v3.6.16 for a release
// built from the module proxy, chaosbench/etcd:builtin-<digest> for the etcd linked into chaosbench.
const ImageRepo = "chaosbench/etcd"

// EtcdImage is a local image that runs one etcd server version, and the binary it is built from.
type EtcdImage struct {
	// Ref is the image reference, e.g. chaosbench/etcd:v3.6.16.
	Ref string
	// Version is the etcd release the image runs ("v3.6.16"); for the builtin image, the linked release.
	Version string
	// Builtin is true for the image that wraps chaosbench's own member mode.
	Builtin bool
	// Binary is the host path of the binary copied into the image; it also runs on the host, where
	// flags are validated against it.
	Binary string
	// Digest is the SHA-256 of Binary: an image whose label differs is stale and is rebuilt.
	Digest string
	// Failpoints lists the gofail failpoints of a failpoint build (nil for a plain one).
	Failpoints []string
}

// Entrypoint is the image's command, to which the member's etcd flags are appended.
func (img EtcdImage) Entrypoint() []string {
	if img.Builtin {
		return []string{"/chaosbench", MemberCommand}
	}
	return []string{"/usr/local/bin/etcd"}
}

// Label returns the version as reports show it: "v3.6.16", "v3.6.16 (failpoints)" for a failpoint build
// (another binary: runs on it compare apart), or "builtin (v3.6.16)".
func (img EtcdImage) Label() string {
	switch {
	case img.Builtin:
		return fmt.Sprintf("%s (v%s)", etcdbuild.Builtin, strings.TrimPrefix(img.Version, "v"))
	case img.Failpoints != nil:
		return img.Version + " (failpoints)"
	}
	return img.Version
}

// ImageOptions configures how images are resolved and built.
type ImageOptions struct {
	// Build configures the etcd builds (cache directory, progress output).
	Build etcdbuild.Options
	// Log receives progress lines (builds); nil discards them.
	Log io.Writer
	// BuiltinBinary is the static chaosbench binary that the builtin image wraps; default: this executable.
	BuiltinBinary string
	// Failpoints resolves releases to their failpoint builds (etcdbuild.Release.Failpoints). The builtin
	// etcd has no failpoints: asking for them with it is a usage error.
	Failpoints bool
}

// ResolveImage finds (building when needed) the binary for an etcd version ("v3.5.35", or "builtin" or ""
// for the etcd linked into chaosbench) and describes its image. It does not touch Docker: the embedded
// backend runs the same binaries as processes.
func ResolveImage(ctx context.Context, ver string, opts ImageOptions) (EtcdImage, error) {
	if ver == "" || ver == etcdbuild.Builtin {
		if opts.Failpoints {
			return EtcdImage{}, outcome.Usagef("--failpoints: the builtin etcd has no failpoints; give a release, e.g. --etcd-version v3.6.16 --failpoints")
		}
		bin := opts.BuiltinBinary
		if bin == "" {
			exe, err := os.Executable()
			if err != nil {
				return EtcdImage{}, fmt.Errorf("find own executable: %w", err)
			}
			bin = exe
		}
		digest, err := fileDigest(bin)
		if err != nil {
			return EtcdImage{}, err
		}
		return EtcdImage{Ref: ImageRepo + ":builtin-" + digest[:12], Version: "v" + version.Version,
			Builtin: true, Binary: bin, Digest: digest}, nil
	}
	rel, err := etcdbuild.Parse(ver)
	if err != nil {
		return EtcdImage{}, err
	}
	rel.Failpoints = opts.Failpoints
	bopts := opts.Build
	if bopts.Log == nil {
		bopts.Log = opts.Log
	}
	bin, err := etcdbuild.Build(ctx, rel, bopts)
	if err != nil {
		return EtcdImage{}, err
	}
	digest, err := fileDigest(bin)
	if err != nil {
		return EtcdImage{}, err
	}
	img := EtcdImage{Ref: ImageRepo + ":" + rel.Version, Version: rel.Version, Binary: bin, Digest: digest}
	if rel.Failpoints {
		img.Ref += "-failpoints"
		if img.Failpoints, err = etcdbuild.FailpointNames(bin); err != nil {
			return EtcdImage{}, err
		}
	}
	return img, nil
}

// EnsureImage builds img's image FROM scratch unless an image with its tag and binary digest exists. The
// builtin image needs a static chaosbench binary: a dynamically linked one is a usage error that says how to
// build one.
func EnsureImage(ctx context.Context, d *client.Client, img EtcdImage, log io.Writer) (built bool, err error) {
	if log == nil {
		log = io.Discard
	}
	if existing, err := d.ImageInspect(ctx, img.Ref); err == nil {
		if existing.Config != nil && existing.Config.Labels[LabelBinaryDigest] == img.Digest {
			return false, nil
		}
	} else if !cerrdefs.IsNotFound(err) {
		return false, fmt.Errorf("inspect image %s: %w", img.Ref, err)
	}
	if img.Builtin {
		if err := CheckStatic(img.Binary); err != nil {
			return false, err
		}
	}
	began := time.Now()
	buildCtx, err := imageContext(img)
	if err != nil {
		return false, err
	}
	kind := "etcd"
	if img.Builtin {
		kind = etcdbuild.Builtin
	}
	res, err := d.ImageBuild(ctx, buildCtx, client.ImageBuildOptions{
		Tags:        []string{img.Ref},
		Remove:      true,
		ForceRemove: true,
		Labels: map[string]string{
			LabelOwned: "true", LabelImageKind: kind, LabelEtcdVersion: img.Version, LabelBinaryDigest: img.Digest,
		},
	})
	if err != nil {
		return false, fmt.Errorf("build image %s: %w", img.Ref, err)
	}
	defer res.Body.Close()
	if err := ReadDockerStream(res.Body); err != nil {
		return false, fmt.Errorf("build image %s: %w", img.Ref, err)
	}
	fmt.Fprintf(log, "built image %s (etcd %s) in %.1fs\n", img.Ref, img.Version, time.Since(began).Seconds())
	if img.Builtin {
		removeStaleBuiltins(ctx, d, img.Ref)
	}
	return true, nil
}

// imageContext returns the build context: a Dockerfile and the binary.
func imageContext(img EtcdImage) (io.Reader, error) {
	bin, err := os.ReadFile(img.Binary)
	if err != nil {
		return nil, fmt.Errorf("build image %s: %w", img.Ref, err)
	}
	dest := "/usr/local/bin/etcd"
	if img.Builtin {
		dest = "/chaosbench"
	}
	entry, _ := json.Marshal(img.Entrypoint())
	// /tmp exists for etcd's and Go's temporary files; FROM scratch has no file system at all.
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY bin %s\nCOPY tmp /tmp\nENTRYPOINT %s\n", dest, entry)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	files := []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: "Dockerfile", mode: 0o644, data: []byte(dockerfile)},
		{name: "bin", mode: 0o755, data: bin},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: now, Typeflag: tar.TypeReg}
		if f.dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("build image %s: %w", img.Ref, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("build image %s: %w", img.Ref, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build image %s: %w", img.Ref, err)
	}
	return &buf, nil
}

// ReadDockerStream consumes the Docker engine's JSON progress stream (of an image build, import or load)
// and returns the error it reports, if any.
func ReadDockerStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	var last string
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read the engine's progress: %w (last: %s)", err, last)
		}
		if msg.Error != "" {
			return errors.New(strings.TrimSpace(msg.Error))
		}
		if s := strings.TrimSpace(msg.Stream); s != "" {
			last = s
		}
	}
}

// staleAfter is how old another binary's builtin image must be before a build removes it: a chaosbench
// of another build may have just built its own and not yet created its containers.
const staleAfter = time.Hour

// removeStaleBuiltins removes builtin images of other chaosbench binaries, built more than staleAfter ago.
// Images in use by a container stay (no force).
func removeStaleBuiltins(ctx context.Context, d *client.Client, keep string) {
	list, err := d.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("label", LabelImageKind+"="+etcdbuild.Builtin),
	})
	if err != nil {
		return
	}
	for _, im := range list.Items {
		stale := time.Since(time.Unix(im.Created, 0)) > staleAfter
		for _, tag := range im.RepoTags {
			if tag == keep {
				stale = false
			}
		}
		if stale {
			d.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{PruneChildren: true})
		}
	}
}

// CheckStatic refuses a dynamically linked binary: it cannot run in a FROM scratch image.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return outcome.Usagef("%s is dynamically linked (built with cgo) and cannot run in a FROM scratch image: "+
				"build chaosbench with CGO_ENABLED=0 (make build does), or pick a release with --etcd-version", path)
		}
	}
	return nil
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Minor returns the image's etcd minor version (4 for v3.4.13), or 0 when it cannot tell.
func (img EtcdImage) Minor() int {
	parts := strings.SplitN(strings.TrimPrefix(img.Version, "v"), ".", 3)
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// BuildImages builds the etcd binaries of versions (cached ones are reused; failpoint builds with
// opts.Failpoints) and, unless binaryOnly, their images. It is `chaosbench image build`: builds done ahead
// of a run keep the run's own start quick.
func BuildImages(ctx context.Context, versions []string, binaryOnly bool, opts ImageOptions) ([]EtcdImage, error) {
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	var images []EtcdImage
	for _, v := range versions {
		img, err := ResolveImage(ctx, v, opts)
		if err != nil {
			return images, err
		}
		images = append(images, img)
	}
	if binaryOnly {
		return images, nil
	}
	d, err := DockerClient(ctx)
	if err != nil {
		return images, err
	}
	defer d.Close()
	for _, img := range images {
		if _, err := EnsureImage(ctx, d.Client, img, log); err != nil {
			return images, err
		}
	}
	return images, nil
}

// ImageInfo describes one of chaosbench's local images.
type ImageInfo struct {
	Ref     string
	Version string
	Kind    string // "etcd" or "builtin"
	Size    int64
	Created time.Time
}

// ListImages lists chaosbench's local images, newest first.
func ListImages(ctx context.Context) ([]ImageInfo, error) {
	d, err := DockerClient(ctx)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	list, err := d.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", LabelOwned)})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []ImageInfo
	for _, im := range list.Items {
		ref := im.ID
		if len(im.RepoTags) > 0 {
			ref = im.RepoTags[0]
		}
		out = append(out, ImageInfo{Ref: ref, Version: im.Labels[LabelEtcdVersion], Kind: im.Labels[LabelImageKind],
			Size: im.Size, Created: time.Unix(im.Created, 0)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}
