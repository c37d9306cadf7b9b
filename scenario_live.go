package chaosbench

import (
	"net"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// LiveOptions are a run's live metrics: served for Prometheus to scrape, pushed by remote write, or both.
type LiveOptions struct {
	// MetricsAddr is where /metrics is served while the run lasts (host:port; empty: not served).
	MetricsAddr string `json:"metrics-addr,omitempty"`
	// MetricsLinger keeps /metrics up this long after the run, so that a scraper sees the verdicts.
	MetricsLinger time.Duration `json:"metrics-linger,omitempty"`
	// RemoteWrite is a Prometheus remote-write URL the series are pushed to every RemoteWriteInterval.
	RemoteWrite         string        `json:"prometheus-remote-write,omitempty"`
	RemoteWriteInterval time.Duration `json:"prometheus-remote-write-interval,omitempty"`
	// Credentials of the remote write, from files (never in a flag's value or any output).
	RemoteWriteUser         string `json:"prometheus-remote-write-user,omitempty"`
	RemoteWritePasswordFile string `json:"prometheus-remote-write-password-file,omitempty"`
	RemoteWriteTokenFile    string `json:"prometheus-remote-write-bearer-token-file,omitempty"`
}

func bindLiveFlags(fs *pflag.FlagSet, o *LiveOptions) {
	fs.StringVar(&o.MetricsAddr, "metrics-addr", o.MetricsAddr, "serve Prometheus metrics of the run on host:port/metrics while it runs (chaosbench_* series: results/SCHEMA.md)")
	fs.DurationVar(&o.MetricsLinger, "metrics-linger", o.MetricsLinger, "keep serving /metrics this long after the run, so that a scraper sees the final counts and verdicts")
	fs.StringVar(&o.RemoteWrite, "prometheus-remote-write", o.RemoteWrite, "push the same series to this Prometheus remote-write URL during the run (for CI runners nothing scrapes)")
	fs.DurationVar(&o.RemoteWriteInterval, "prometheus-remote-write-interval", 5*time.Second, "time between remote-write pushes")
	fs.StringVar(&o.RemoteWriteUser, "prometheus-remote-write-user", "", "remote write: basic-auth user (the password comes from --prometheus-remote-write-password-file)")
	fs.StringVar(&o.RemoteWritePasswordFile, "prometheus-remote-write-password-file", "", "remote write: file holding the basic-auth password")
	fs.StringVar(&o.RemoteWriteTokenFile, "prometheus-remote-write-bearer-token-file", "", "remote write: file holding a bearer token")
}

// validate checks the live options before anything starts.
func (o *LiveOptions) validate() error {
	if o.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.MetricsAddr); err != nil {
			return outcome.Usagef("--metrics-addr %q: host:port, e.g. 127.0.0.1:9464", o.MetricsAddr)
		}
	}
	if o.MetricsLinger < 0 || o.RemoteWriteInterval < 0 {
		return outcome.Usagef("--metrics-linger and --prometheus-remote-write-interval must not be negative")
	}
	if o.RemoteWrite == "" {
		if o.RemoteWriteUser != "" || o.RemoteWritePasswordFile != "" || o.RemoteWriteTokenFile != "" {
			return outcome.Usagef("remote-write credentials without --prometheus-remote-write")
		}
		return nil
	}
	u, err := url.Parse(o.RemoteWrite)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return outcome.Usagef("--prometheus-remote-write: an http:// or https:// URL")
	}
	if u.User != nil {
		// It would be stored with the run's settings and printed: credentials come from files.
		return outcome.Usagef("--prometheus-remote-write: no credentials in the URL; use --prometheus-remote-write-user with a password file, or a bearer token file")
	}
	if (o.RemoteWriteUser == "") != (o.RemoteWritePasswordFile == "") {
		return outcome.Usagef("--prometheus-remote-write-user and --prometheus-remote-write-password-file go together")
	}
	if o.RemoteWriteUser != "" && o.RemoteWriteTokenFile != "" {
		return outcome.Usagef("remote write: basic auth or a bearer token, not both")
	}
	return nil
}
