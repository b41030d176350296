// Package s3test starts a real S3-compatible server for tests: versitygw
// (github.com/versity/versitygw, Apache-2.0) with its posix backend on the
// test's temporary directory, on a free loopback port, with a root access
// key and secret made for the test, over http or, with TLS, over https
// with a certificate from a CA made for the test. It stops the server when
// the test ends; its output goes to a file shown when the test fails.
//
// A bucket is a directory of the backend (Bucket makes one), so the
// package needs no S3 client: the S3 client belongs to backupstores/s3.
//
// The binary is SVC_VERSITYGW_BIN, else `versitygw` on PATH, else the one
// scripts/versitygw-tool.sh built into its cache. Without one, tests skip
// and say how to get one; with SVC_REQUIRE_S3=1 (CI) they fail instead.
//
// It is for tests only and must not be imported by production code.
package s3test

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
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/svchost/svc/internal/cacert"
	"github.com/svchost/svc/internal/testserver"
)

// Version is the versitygw release scripts/versitygw-tool.sh builds.
const Version = "v1.8.0"

// Environment variables the harness reads.
const (
	// EnvBinary names the versitygw binary to run.
	EnvBinary = "SVC_VERSITYGW_BIN"
	// EnvRequire, set to 1, turns a missing binary into a test failure.
	EnvRequire = "SVC_REQUIRE_S3"
)

const howToGet = "build one with `bash scripts/versitygw-tool.sh` (once per machine: versitygw " + Version +
	" goes into a cache outside the repository, in about 3 minutes; `make test` then finds it), or set " +
	EnvBinary + " to a versitygw binary"

const (
	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is its S3 API: http://127.0.0.1:<port>, or https:// with TLS.
	Endpoint string
	// AccessKey and SecretKey are its root user's credentials.
	AccessKey, SecretKey string
	// Root is the posix backend's directory: each directory in it is a
	// bucket.
	Root string
	// CAFile is the PEM file of the CA that signed its certificate (TLS
	// only).
	CAFile string
	// LogPath is the file its output goes to.
	LogPath string

	stop func()
}

// Options of a server.
type Options struct {
	// TLS serves https with a certificate for 127.0.0.1 and localhost.
	TLS bool
}

// Binary returns the versitygw binary the harness would run, or an error
// that says why there is none.
func Binary() (string, error) { return testserver.FindTool(EnvBinary, "versitygw", CachePath()) }

// CachePath is where scripts/versitygw-tool.sh keeps the binary it builds:
// ${SVC_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-tools}/versitygw-<version>/versitygw.
func CachePath() string {
	return testserver.ToolCache("versitygw", "SVC_VERSITYGW_VERSION", Version)
}

// Start starts a server for the test and stops it at the test's end.
// Without a binary it skips the test, or fails it when SVC_REQUIRE_S3=1.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	return testserver.StartTool(t, Binary, EnvRequire, "a real S3 server (versitygw)", howToGet, func(bin, dir string, attempt int) (*Server, error) {
		return start(t, bin, dir, attempt, opts)
	})
}

func start(t testing.TB, bin, dir string, attempt int, opts Options) (*Server, error) {
	t.Helper()
	port, err := testserver.FreePorts(1)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(port),
		AccessKey: "AK" + testserver.RandomHex(9),
		SecretKey: testserver.RandomHex(20),
		Root:      filepath.Join(dir, fmt.Sprintf("root-%d", attempt)),
		LogPath:   filepath.Join(dir, fmt.Sprintf("versitygw-%d.log", attempt)),
	}
	if err := os.Mkdir(s.Root, 0o700); err != nil {
		return nil, err
	}
	args := []string{"--port", "127.0.0.1:" + strconv.Itoa(port), "--health", "/health", "--quiet"}
	if opts.TLS {
		cert, key, ca, err := certificates(dir)
		if err != nil {
			return nil, err
		}
		args = append(args, "--cert", cert, "--key", key)
		s.Endpoint, s.CAFile = "https://127.0.0.1:"+strconv.Itoa(port), ca
	}
	args = append(args, "posix", s.Root)
	cmd := exec.Command(bin, args...)
	// The root user's keys go through the environment, not the command
	// line other users can read; none of our own S3 or versitygw settings
	// reach it.
	cmd.Env = append(testserver.EnvironWithout("ROOT_", "VGW_", "AWS_", "LOGFILE=", "WEBHOOK="),
		"ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Dir = dir
	cmd.SysProcAttr = procAttr()
	s.stop, err = testserver.Serve(t, cmd, s.LogPath, "versitygw", stopTimeout, func(exited <-chan struct{}) error {
		client, err := s.client()
		if err != nil {
			return err
		}
		defer client.CloseIdleConnections()
		return testserver.WaitHTTP(client, s.Endpoint+"/health", exited, startTimeout, "versitygw")
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// client is an HTTP client that trusts the server's certificate.
func (s *Server) client() (*http.Client, error) {
	tr := &http.Transport{Proxy: nil}
	if s.CAFile != "" {
		pool, err := cacert.Pool(s.CAFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: tr}, nil
}

// Bucket makes a bucket (a directory of the posix backend).
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(s.Root, name), 0o700); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
}

// Stop stops the server (SIGINT, then SIGKILL after a grace period); it is
// safe to call more than once, and tests call it to make the storage
// unreachable.
func (s *Server) Stop() {
	s.stop()
}

// certificates writes a CA and a server certificate signed by it for
// 127.0.0.1, ::1 and localhost, and returns the paths of the certificate,
// its key and the CA's certificate.
func certificates(dir string) (cert, key, ca string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "s3test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", "", err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		return "", "", "", err
	}
	cert, key, ca = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "ca.pem")
	for path, block := range map[string]*pem.Block{
		cert: {Type: "CERTIFICATE", Bytes: leafDER},
		key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
		ca:   {Type: "CERTIFICATE", Bytes: caDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return "", "", "", err
		}
	}
	return cert, key, ca, nil
}
