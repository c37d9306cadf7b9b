package profile

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// TestFromPrometheus serves testdata's scrapes through the Prometheus HTTP API's query endpoint (each
// process an instance, each scrape the series at its time) and checks that the profile read from the API
// is the one read from the files.
func TestFromPrometheus(t *testing.T) {
	procs := []Series{series(t, "kube-apiserver-0"), series(t, "kube-apiserver-1"), series(t, "etcd-0")}
	at := []time.Time{procs[0].Scrapes[0].At, procs[0].Scrapes[1].At}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || !strings.Contains(r.URL.Query().Get("query"), "etcd_requests_total") {
			http.Error(w, "unexpected query", http.StatusBadRequest)
			return
		}
		ts, _ := strconv.ParseFloat(r.URL.Query().Get("time"), 64)
		type result struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		var res []result
		for _, p := range procs {
			for _, sc := range p.Scrapes {
				if sc.At.Unix() != int64(ts) {
					continue
				}
				for _, s := range sc.Samples {
					m := map[string]string{"__name__": s.Name, "instance": p.Process, "job": "k8s"}
					for k, v := range s.Labels {
						m[k] = v
					}
					res = append(res, result{m, [2]any{ts, strconv.FormatFloat(s.Value, 'g', -1, 64)}})
				}
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
	}))
	defer srv.Close()
	as, es, err := FromPrometheus(t.Context(), srv.URL, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 2 || len(es) != 1 {
		t.Fatalf("%d apiservers and %d etcd members from the API, want 2 and 1", len(as), len(es))
	}
	got, err := Build(as, es, Options{Name: "testdata"})
	if err != nil {
		t.Fatal(err)
	}
	want := testdataProfile(t)
	if !reflect.DeepEqual(got.Resources, want.Resources) || !reflect.DeepEqual(got.Etcd, want.Etcd) || !reflect.DeepEqual(got.Assumptions, want.Assumptions) {
		a, _ := got.Marshal()
		b, _ := want.Marshal()
		t.Errorf("from the API:\n%s\nfrom the files:\n%s", a, b)
	}
	// Something that is not the API is one usage line.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>login</html>")) }))
	defer bad.Close()
	if _, _, err := FromPrometheus(t.Context(), bad.URL, at); !outcome.IsUsage(err) || !strings.Contains(err.Error(), "not the Prometheus HTTP API") {
		t.Errorf("a login page: %v, want a usage error", err)
	}
}
