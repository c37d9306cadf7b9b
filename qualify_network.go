package chaosbench

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// clientRTTSamples is how many connections measure each member's client round trip.
const clientRTTSamples = 20

// ClientRTT is the round trip from chaosbench's machine to one member's client port, measured as the time
// of a TCP connect (SYN out, SYN-ACK back): no server work lengthens it, unlike a request's.
type ClientRTT struct {
	Endpoint string  `json:"endpoint"`
	Samples  int     `json:"samples"`
	P50      float64 `json:"p50_ms"`
	Max      float64 `json:"max_ms"`
	// Error says why the endpoint could not be measured.
	Error string `json:"error,omitempty"`
}

// measureClientRTT connects clientRTTSamples times to every endpoint of c, one connection at a time.
func measureClientRTT(ctx context.Context, c clusters.Cluster) []ClientRTT {
	var out []ClientRTT
	for _, ep := range c.Endpoints() {
		r := ClientRTT{Endpoint: ep}
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			host = u.Host
		}
		var ds []time.Duration
		d := net.Dialer{Timeout: 2 * time.Second}
		for range clientRTTSamples {
			start := time.Now()
			conn, err := d.DialContext(ctx, "tcp", host)
			if err != nil {
				r.Error = err.Error()
				break
			}
			ds = append(ds, time.Since(start))
			conn.Close()
		}
		if len(ds) > 0 {
			slices.Sort(ds)
			r.Samples, r.P50, r.Max = len(ds), float64(ds[len(ds)/2])/1e6, float64(ds[len(ds)-1])/1e6
		}
		out = append(out, r)
	}
	return out
}

// worstClientRTT returns the highest median client round trip of the steps, and its endpoint.
func worstClientRTT(steps []Step) (float64, string, bool) {
	var worst float64
	var at string
	found := false
	for _, st := range steps {
		for _, r := range st.ClientRTT {
			if r.Samples > 0 && (!found || r.P50 > worst) {
				worst, at, found = r.P50, r.Endpoint, true
			}
		}
	}
	return worst, at, found
}

func describeClientRTT(steps []Step) string {
	if v, at, ok := worstClientRTT(steps); ok {
		return fmt.Sprintf("client-to-member RTT (TCP connect) median up to %.3f ms (%s)", v, at)
	}
	return ""
}
