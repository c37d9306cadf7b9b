package clusters

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// TLSFiles names PEM files: a CA bundle, a certificate and its key.
type TLSFiles struct {
	CA, Cert, Key string
}

// ClientConfig loads the files as a client TLS configuration.
func (f TLSFiles) ClientConfig() (*tls.Config, error) {
	info := transport.TLSInfo{CertFile: f.Cert, KeyFile: f.Key, TrustedCAFile: f.CA}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load TLS files: %w", err)
	}
	return cfg, nil
}

// GenerateTLS writes a fresh CA, a server certificate for loopback and a client certificate into dir, for
// members that serve clients over mutual TLS as kube-apiserver's etcd does.
func GenerateTLS(dir string) (server, client TLSFiles, err error) {
	return generateTLS(dir, nil)
}

// generateTLS is GenerateTLS with the server certificate also good for the given addresses (member
// containers' IPs).
func generateTLS(dir string, hosts []net.IP) (server, client TLSFiles, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return server, client, fmt.Errorf("tls dir: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return server, client, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "chaosbench CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return server, client, fmt.Errorf("create CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return server, client, fmt.Errorf("parse CA: %w", err)
	}
	caPath := filepath.Join(dir, "ca.pem")
	if err := writePEM(caPath, "CERTIFICATE", caDER); err != nil {
		return server, client, err
	}
	issue := func(name string, serial int64, usage ...x509.ExtKeyUsage) (TLSFiles, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return TLSFiles{}, fmt.Errorf("generate %s key: %w", name, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: "chaosbench-" + name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  usage,
			IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, hosts...),
			DNSNames:     []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return TLSFiles{}, fmt.Errorf("create %s certificate: %w", name, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return TLSFiles{}, fmt.Errorf("encode %s key: %w", name, err)
		}
		f := TLSFiles{CA: caPath, Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
		if err := writePEM(f.Cert, "CERTIFICATE", der); err != nil {
			return TLSFiles{}, err
		}
		return f, writePEM(f.Key, "EC PRIVATE KEY", keyDER)
	}
	// etcd's gRPC gateway dials the member's own client port with the server certificate, so that
	// certificate must be good for client authentication too.
	if server, err = issue("server", 2, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth); err != nil {
		return server, client, err
	}
	client, err = issue("client", 3, x509.ExtKeyUsageClientAuth)
	return server, client, err
}

func writePEM(path, kind string, der []byte) error {
	b := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}
