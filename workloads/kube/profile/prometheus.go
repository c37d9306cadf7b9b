package profile

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// profileSeries are the series a profile reads, as the Prometheus HTTP API names them (histograms by their
// _count and _sum series).
var profileSeries = []string{
	mResourceObjects, mSizeEstimate, mBookmarks, mObjects, mObjectsOld, mEtcdRequests, mEtcdDuration,
	mListTotal, mListFetched, mListEvaluated, mListReturned, mCacheLists, mCacheInits, mWatchEvents,
	mWatchSizesCount, mWatchSizesSum, mLongRunning, mRegisteredWatch, "apiserver_request_total",
	mEtcdDBSize, mEtcdDBInUse, mEtcdKeys, mEtcdHandled, mEtcdStreams, mEtcdWatchers, mEtcdLeaseGranted,
	mEtcdLeaseRevoked, "etcd_server_has_leader", "process_start_time_seconds",
}

// FromPrometheus reads every scraped kube-apiserver's and etcd member's series at the times given (two
// or more, in order) from a Prometheus server's HTTP API, one process per instance label, told apart by
// their series. A server that does not answer, or answers with something else than the API's JSON, is a
// usage error.
func FromPrometheus(ctx context.Context, base string, at []time.Time) (apiservers, members []Series, err error) {
	if len(at) < 2 {
		return nil, nil, outcome.Usagef("--prometheus: a profile needs two or more times (--start and --end)")
	}
	byInstance := map[string]*Series{}
	for _, t := range at {
		samples, err := queryAt(ctx, base, t)
		if err != nil {
			return nil, nil, err
		}
		perInstance := map[string][]Sample{}
		for _, s := range samples {
			inst := s.Labels["instance"]
			delete(s.Labels, "instance")
			delete(s.Labels, "job")
			perInstance[inst] = append(perInstance[inst], s)
		}
		for inst, ss := range perInstance {
			if byInstance[inst] == nil {
				byInstance[inst] = &Series{Process: inst}
			}
			byInstance[inst].Scrapes = append(byInstance[inst].Scrapes, Scrape{Source: base + " " + inst + " at " + t.UTC().Format(time.RFC3339), At: t, AtKnown: true, Samples: ss})
		}
	}
	instances := make([]string, 0, len(byInstance))
	for inst := range byInstance {
		instances = append(instances, inst)
	}
	sort.Strings(instances)
	for _, inst := range instances {
		s := *byInstance[inst]
		last := s.last()
		switch {
		case last.has(mEtcdRequests, mEtcdDuration, mResourceObjects, mObjects, "apiserver_request_total"):
			apiservers = append(apiservers, s)
		case last.has("etcd_server_has_leader"):
			members = append(members, s)
		}
	}
	return apiservers, members, nil
}

// queryAt reads every profile series at time t.
func queryAt(ctx context.Context, base string, t time.Time) ([]Sample, error) {
	q := url.Values{}
	q.Set("query", `{__name__=~"`+strings.Join(profileSeries, "|")+`"}`)
	q.Set("time", strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/api/v1/query?"+q.Encode(), nil)
	if err != nil {
		return nil, outcome.Usagef("--prometheus %s: %v", base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the query itself is too long to repeat
		}
		return nil, outcome.Usagef("--prometheus %s: %v", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, outcome.Usagef("--prometheus %s: %v", base, err)
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status == "" {
		return nil, outcome.Usagef("--prometheus %s: not the Prometheus HTTP API (%s)", base, resp.Status)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		return nil, outcome.Usagef("--prometheus %s: query failed: %s %s", base, r.Status, r.Error)
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, m := range r.Data.Result {
		s, _ := m.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, outcome.Usagef("--prometheus %s: value %v of %s: %v", base, m.Value[1], m.Metric["__name__"], err)
		}
		name := m.Metric["__name__"]
		delete(m.Metric, "__name__")
		out = append(out, Sample{Name: name, Labels: m.Metric, Value: v})
	}
	if len(out) == 0 {
		return nil, outcome.Usagef("--prometheus %s: no kube-apiserver or etcd series at %s", base, t.UTC().Format(time.RFC3339))
	}
	return out, nil
}
