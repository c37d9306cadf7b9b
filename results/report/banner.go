package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// BannerFile holds a run's banner (results/SCHEMA.md): a verdict about the run that a job deciding more
// than the run (a qualification's ladder) puts at the top of its report, so that a reader who opens one
// step's report.html first sees what it was part of.
const BannerFile = "banner.json"

// Banner is a line at the top of a run's report.html and report.md.
type Banner struct {
	// Title names what the banner speaks for ("qualification").
	Title string `json:"title"`
	// Text is its verdict, in one line.
	Text string `json:"text"`
	// Link is a page about it, relative to the run directory ("../qualification.html"), and MarkdownLink
	// the same for report.md ("../qualification.md"; default Link); both optional.
	Link         string `json:"link,omitempty"`
	MarkdownLink string `json:"markdown_link,omitempty"`
	// Class colours it: ok, fail or warn.
	Class string `json:"class"`
}

// readBanner reads dir's banner; a run without one has nil.
func readBanner(dir string) (*Banner, error) {
	b, err := os.ReadFile(filepath.Join(dir, BannerFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var bn Banner
	if err := json.Unmarshal(b, &bn); err != nil {
		return nil, fmt.Errorf("%s: %w", BannerFile, err)
	}
	return &bn, nil
}

// SetBanner stores b as the banner of run directory dir and renders its report.md and report.html again
// with it at the top. summary.json and the run's other outputs are not touched.
func SetBanner(dir string, b Banner) error {
	raw, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, BannerFile), append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("banner: %w", err)
	}
	r, err := Load(dir)
	if err != nil {
		return fmt.Errorf("banner: %w", err)
	}
	return errors.Join(
		writeFile(filepath.Join(dir, MarkdownFile), func(w io.Writer) error { return WriteMarkdown(w, r) }),
		writeFile(filepath.Join(dir, HTMLFile), func(w io.Writer) error { return WriteHTML(w, r) }),
	)
}
