package clusters

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// endpointForms is what an endpoint may look like, for error messages.
const endpointForms = "expected host:port (e.g. 127.0.0.1:2379), http(s)://host:port or unix://path"

// ParseEndpoints reads client endpoints as etcdctl and etcd's benchmark read them and returns them as the
// URLs the etcd client will dial:
//
//   - host:port becomes http://host:port, or https://host:port when tls is set (TLS files were given):
//     etcdctl speaks TLS to a bare address exactly when it has TLS files;
//   - http://host:port and https://host:port keep their scheme (a trailing slash is dropped);
//   - unix://path and unixs://path (a local socket) are kept as given: the etcd client dials them itself;
//   - every entry may be a comma-separated list, as --endpoints and ETCDCTL_ENDPOINTS are.
//
// Anything else is refused with an error that quotes the entry and says why: an empty entry, no host, no
// port or a port outside 1-65535, an unknown scheme, a path, user or query after host:port, and a list
// that mixes plaintext and TLS endpoints (the etcd client dials every endpoint with the transport of the
// first, so such a list would silently talk TLS to plaintext members or the other way round).
func ParseEndpoints(endpoints []string, tls bool) ([]string, error) {
	out, _, err := parseEndpoints(endpoints, tls)
	return out, err
}

// parseEndpoints is ParseEndpoints, and also says whether the client will speak TLS to the endpoints.
func parseEndpoints(endpoints []string, tls bool) ([]string, bool, error) {
	var out []string
	var first string
	var firstSecure bool
	for _, entry := range endpoints {
		for _, ep := range strings.Split(entry, ",") {
			ep = strings.TrimSpace(ep)
			if ep == "" {
				if len(endpoints) > 1 || strings.Contains(entry, ",") {
					// --endpoints splits its value before we see it: quote the whole list.
					return nil, false, fmt.Errorf("%q: empty endpoint in the list", strings.Join(endpoints, ","))
				}
				return nil, false, fmt.Errorf("empty endpoint; %s", endpointForms)
			}
			u, secure, err := parseEndpoint(ep, tls)
			if err != nil {
				return nil, false, fmt.Errorf("%q: %w", ep, err)
			}
			if first == "" {
				first, firstSecure = ep, secure
			} else if secure != firstSecure {
				return nil, false, fmt.Errorf("%q and %q: one list cannot mix plaintext and TLS endpoints", first, ep)
			}
			out = append(out, u)
		}
	}
	return out, firstSecure, nil
}

// parseEndpoint returns one endpoint as a URL, and whether the client will speak TLS to it.
func parseEndpoint(ep string, tls bool) (string, bool, error) {
	scheme, rest, found := strings.Cut(ep, "://")
	if !found {
		if strings.HasPrefix(ep, "unix:") || strings.HasPrefix(ep, "unixs:") {
			return "", false, errors.New("write a socket as unix://path")
		}
		scheme = "http"
		if tls {
			scheme = "https"
		}
		u, err := hostPortURL(scheme, ep)
		return u, tls, err
	}
	scheme = strings.ToLower(scheme)
	switch scheme {
	case "http", "https":
		hostPort := strings.TrimSuffix(rest, "/")
		if i := strings.IndexAny(hostPort, "/?#@"); i >= 0 {
			return "", false, fmt.Errorf("unexpected %q after %s://: only host:port may follow", hostPort[i:], scheme)
		}
		u, err := hostPortURL(scheme, hostPort)
		return u, scheme == "https", err
	case "unix", "unixs":
		if rest == "" || rest == "/" {
			return "", false, fmt.Errorf("no socket path after %s://", scheme)
		}
		// The client speaks TLS over unix:// when it has TLS files and always over unixs://.
		return scheme + "://" + rest, scheme == "unixs" || tls, nil
	case "":
		return "", false, fmt.Errorf("no scheme before ://; %s", endpointForms)
	}
	return "", false, fmt.Errorf("unknown scheme %q; %s", scheme, endpointForms)
}

// hostPortURL checks host:port and returns scheme://host:port.
func hostPortURL(scheme, hostPort string) (string, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return "", fmt.Errorf("no port; %s", endpointForms)
		}
		return "", fmt.Errorf("not host:port (IPv6 addresses go in brackets: [::1]:2379); %s", endpointForms)
	}
	if host == "" {
		return "", fmt.Errorf("no host; %s", endpointForms)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q: expected a number from 1 to 65535", port)
	}
	u := scheme + "://" + net.JoinHostPort(host, port)
	if parsed, err := url.Parse(u); err != nil || parsed.Hostname() != host {
		return "", fmt.Errorf("host %q: not a host name or IP address", host)
	}
	return u, nil
}
