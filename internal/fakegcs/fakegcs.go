// Package fakegcs is a stand-in for a Google Cloud Storage bucket, as GCS's JSON API serves it over HTTP: the
// Prow job's script (ci/prow-nightly.sh) reads a job's history through that API, and its tests point the
// script at this bucket, on a test's machine and from a pod of a local Kubernetes node alike.
package fakegcs

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Bucket serves objects as GCS's JSON API does (storage/v1/b/BUCKET/o: listings by prefix, with a
// delimiter, two entries a page; o/NAME?alt=media: an object), or fails as told.
type Bucket struct {
	// Name is the bucket's name; Objects its objects' contents by name.
	Name    string
	Objects map[string]string
	// Refuse answers 403 everywhere; Garbage answers listings with HTML; Broken names an object that
	// answers 500.
	Refuse  bool
	Garbage bool
	Broken  string
}

// ServeHTTP answers as GCS's JSON API does.
func (g *Bucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.Refuse {
		http.Error(w, "Anonymous caller does not have storage.objects.list access", http.StatusForbidden)
		return
	}
	base := "/storage/v1/b/" + g.Name + "/o"
	path := r.URL.EscapedPath()
	if name, ok := strings.CutPrefix(path, base+"/"); ok {
		name, err := url.PathUnescape(name)
		body, found := g.Objects[name]
		switch {
		case err != nil || r.URL.Query().Get("alt") != "media" || !found:
			http.NotFound(w, r)
		case name == g.Broken:
			http.Error(w, "backend error", http.StatusInternalServerError)
		default:
			w.Write([]byte(body))
		}
		return
	}
	if path != base {
		http.NotFound(w, r)
		return
	}
	if g.Garbage {
		w.Write([]byte("<html>sign in</html>"))
		return
	}
	q := r.URL.Query()
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	type entry struct{ name, prefix string }
	var entries []entry
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(g.Objects)) {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if i := strings.Index(rest, delim); delim != "" && i >= 0 {
			p := prefix + rest[:i+1]
			if !seen[p] {
				seen[p] = true
				entries = append(entries, entry{prefix: p})
			}
			continue
		}
		entries = append(entries, entry{name: name})
	}
	from, _ := strconv.Atoi(q.Get("pageToken"))
	to := min(from+2, len(entries))
	page := map[string]any{"kind": "storage#objects"}
	var items []map[string]string
	var prefixes []string
	for _, e := range entries[from:to] {
		if e.prefix != "" {
			prefixes = append(prefixes, e.prefix)
		} else {
			items = append(items, map[string]string{"kind": "storage#object", "name": e.name, "bucket": g.Name})
		}
	}
	if items != nil {
		page["items"] = items
	}
	if prefixes != nil {
		page["prefixes"] = prefixes
	}
	if to < len(entries) {
		page["nextPageToken"] = strconv.Itoa(to)
	}
	json.NewEncoder(w).Encode(page)
}
