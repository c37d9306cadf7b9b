package clusters

import (
	"context"
	"fmt"
	"slices"
)

// SetImage moves the named member to another etcd release, as an operator upgrades or downgrades one
// machine of a cluster: the member stops gracefully, and a container of the release's image starts on the
// same name, address, data directory and flags. It returns once the new member listens; the caller waits
// for the cluster's health. version names an image of DockerOptions.Images or MoreImages by version
// ("v3.6.16") or reference. The member's raft id and data stay.
func (c *Docker) SetImage(ctx context.Context, member, version string) error {
	img, ok := c.image(version)
	if !ok {
		return fmt.Errorf("move %s to %s: no image of that version was prepared for the cluster", member, version)
	}
	for _, m := range c.members {
		if m.name == member {
			return m.setImage(ctx, img)
		}
	}
	return fmt.Errorf("move %s to %s: no such member", member, version)
}

// MemberVersion returns the version of the image the named member runs ("" for no such member).
func (c *Docker) MemberVersion(member string) string {
	for _, m := range c.members {
		if m.name == member {
			return m.Image().Version
		}
	}
	return ""
}

// image finds a prepared image by version or reference, preferring a release's own image to the builtin
// one of the same version.
func (c *Docker) image(version string) (EtcdImage, bool) {
	var found EtcdImage
	ok := false
	for _, img := range append(slices.Clone(c.opts.Images), c.opts.MoreImages...) {
		if img.Ref == version || (img.Version == version && (!ok || found.Builtin)) {
			found, ok = img, true
		}
	}
	return found, ok
}
