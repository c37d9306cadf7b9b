package clusters

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Credentials are a user's name and password on a cluster with authentication enabled.
type Credentials struct {
	User     string
	Password string
}

// Auth is how the clients of a cluster with authentication enabled log in. The harness's own requests
// (faults, hashes, member operations, snapshots) need root's permissions; the load runs as Load, which
// for a cluster chaosbench starts is a user without the root role, so that etcd checks its every request
// against its permissions (a root user skips that check, and with it the permission cache some of etcd's
// auth bugs live in).
type Auth struct {
	Admin Credentials
	Load  Credentials
	// tokens are Admin's, one per member: etcd's simple tokens are good on the member that gave them.
	tokens *tokenCache
}

// newAuth returns an Auth with a token cache of its own.
func newAuth(admin, load Credentials) *Auth {
	return &Auth{Admin: admin, Load: load, tokens: &tokenCache{tokens: map[string]string{}}}
}

// authenticated is a cluster whose clients log in.
type authenticated interface {
	authInfo() *Auth
}

// AuthOf returns how c's clients log in, or nil for a cluster without authentication.
func AuthOf(c Cluster) *Auth {
	if a, ok := c.(authenticated); ok {
		return a.authInfo()
	}
	return nil
}

// ClientConfig returns a client configuration for c's endpoints, logged in as the harness (Auth.Admin)
// when c has authentication enabled. Callers set timeouts and logging.
func ClientConfig(c Cluster) clientv3.Config {
	cfg := clientConfig(c)
	if a := AuthOf(c); a != nil {
		cfg.Username, cfg.Password = a.Admin.User, a.Admin.Password
	}
	return cfg
}

// LoadClientConfig is ClientConfig for the load's clients: logged in as Auth.Load.
func LoadClientConfig(c Cluster) clientv3.Config {
	cfg := clientConfig(c)
	if a := AuthOf(c); a != nil {
		cfg.Username, cfg.Password = a.Load.User, a.Load.Password
	}
	return cfg
}

// ParseUser reads a user as etcdctl's --user takes it, name[:password]; without a password in it, the
// password comes from passwordFile (etcdctl's --password), its first line. A user without a password
// from either is a usage error, as is an empty name.
func ParseUser(user, passwordFile string) (Credentials, error) {
	name, password, hasPassword := strings.Cut(user, ":")
	if name == "" {
		return Credentials{}, outcome.Usagef("--user: no user name before the colon (name[:password])")
	}
	if hasPassword {
		if passwordFile != "" {
			return Credentials{}, outcome.Usagef("--user %s: a password in --user and --password-file %s; give one", name, passwordFile)
		}
		if password == "" {
			return Credentials{}, outcome.Usagef("--user %s: the password after the colon is empty", name)
		}
		return Credentials{User: name, Password: password}, nil
	}
	if passwordFile == "" {
		return Credentials{}, outcome.Usagef("--user %s: no password; give --user %s:PASSWORD or --password-file FILE", name, name)
	}
	b, err := os.ReadFile(passwordFile)
	if err != nil {
		return Credentials{}, outcome.Usagef("--password-file: %v", err)
	}
	password, _, _ = strings.Cut(string(b), "\n")
	password = strings.TrimSuffix(password, "\r")
	if password == "" {
		return Credentials{}, outcome.Usagef("--password-file %s: empty first line", passwordFile)
	}
	return Credentials{User: name, Password: password}, nil
}

// LoadUser is the user the load of a cluster chaosbench starts with authentication runs as; LoadRole is
// its role, granted read and write on every key.
const (
	LoadUser = "chaosbench"
	LoadRole = "chaosbench-load"
)

// authSetter is a cluster chaosbench starts, which can remember the credentials EnableAuth created.
type authSetter interface {
	Cluster
	setAuth(a *Auth)
}

// EnableAuth turns authentication on in a cluster chaosbench started, as an operator does: a root user
// with the root role, a load user (LoadUser) whose role (LoadRole) may read and write every key, then
// auth enable. Both passwords are random and never written down; from then on every client the harness
// makes of c logs in (ClientConfig, LoadClientConfig), and so do the hash comparisons.
func EnableAuth(ctx context.Context, c Cluster) (Auth, error) {
	s, ok := c.(authSetter)
	if !ok {
		return Auth{}, fmt.Errorf("enable auth: a %s cluster is not one chaosbench starts", c.Backend())
	}
	a := newAuth(Credentials{User: "root", Password: randomPassword()}, Credentials{User: LoadUser, Password: randomPassword()})
	cfg := clientConfig(c)
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		return Auth{}, fmt.Errorf("enable auth: connect: %w", err)
	}
	defer cli.Close()
	steps := []struct {
		what string
		do   func() error
	}{
		{"add role root", func() error { _, err := cli.RoleAdd(ctx, "root"); return ignore(err, rpctypes.ErrRoleAlreadyExist) }},
		{"add user root", func() error { _, err := cli.UserAdd(ctx, a.Admin.User, a.Admin.Password); return err }},
		{"grant root the root role", func() error { _, err := cli.UserGrantRole(ctx, a.Admin.User, "root"); return err }},
		{"add role " + LoadRole, func() error { _, err := cli.RoleAdd(ctx, LoadRole); return err }},
		// From "\x00" to the end of the key space: every key (etcdctl role grant-permission --from-key).
		{"grant " + LoadRole + " every key", func() error {
			_, err := cli.RoleGrantPermission(ctx, LoadRole, "\x00", "\x00", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"add user " + LoadUser, func() error { _, err := cli.UserAdd(ctx, a.Load.User, a.Load.Password); return err }},
		{"grant " + LoadUser + " " + LoadRole, func() error { _, err := cli.UserGrantRole(ctx, a.Load.User, LoadRole); return err }},
		{"auth enable", func() error { _, err := cli.AuthEnable(ctx); return err }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			return Auth{}, fmt.Errorf("enable auth: %s: %w", st.what, err)
		}
	}
	s.setAuth(a)
	return *a, nil
}

func ignore(err, allowed error) error {
	if errors.Is(err, allowed) {
		return nil
	}
	return err
}

func randomPassword() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tokenCache holds the harness's tokens, one per member, for the connections it opens to one member alone
// (status, hashes, the leader monitor): logging in costs etcd a bcrypt hash and a raft entry, too much for
// a status probe ten times a second.
type tokenCache struct {
	mu     sync.Mutex
	tokens map[string]string // by member address
}

// MemberDialOptions returns the options of a gRPC connection to the member at addr alone (host:port): for
// a cluster with authentication enabled, its calls log in as the harness (Auth.Admin), once per member,
// and again when the member has forgotten the token (a restart, a token's time-to-live).
func MemberDialOptions(c Cluster, addr string) []grpc.DialOption {
	if a := AuthOf(c); a != nil {
		return []grpc.DialOption{a.dialOption(addr)}
	}
	return nil
}

// dialOption is the login interceptor of a connection to the member at addr.
func (a *Auth) dialOption(addr string) grpc.DialOption {
	return grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Auth/Authenticate" {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		for attempt := 0; ; attempt++ {
			tok, err := a.tokens.get(ctx, addr, cc, a.Admin)
			if err != nil {
				return err
			}
			err = invoker(metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, tok), method, req, reply, cc, opts...)
			if attempt == 0 && tokenForgotten(err) {
				a.tokens.drop(addr, tok)
				continue
			}
			return err
		}
	})
}

// tokenForgotten reports whether err says the member does not know the token: 3.5 releases answer
// HashKV's with auth's own error, unconverted (code Unknown, "auth: invalid auth token").
func tokenForgotten(err error) bool {
	return err != nil && (errors.Is(rpctypes.Error(err), rpctypes.ErrInvalidAuthToken) || strings.Contains(err.Error(), "invalid auth token"))
}

func (t *tokenCache) get(ctx context.Context, addr string, cc *grpc.ClientConn, cr Credentials) (string, error) {
	t.mu.Lock()
	tok, ok := t.tokens[addr]
	t.mu.Unlock()
	if ok {
		return tok, nil
	}
	resp, err := pb.NewAuthClient(cc).Authenticate(ctx, &pb.AuthenticateRequest{Name: cr.User, Password: cr.Password})
	if err != nil {
		return "", fmt.Errorf("log in as %s: %w", cr.User, rpctypes.Error(err))
	}
	t.mu.Lock()
	t.tokens[addr] = resp.Token
	t.mu.Unlock()
	return resp.Token, nil
}

func (t *tokenCache) drop(addr, tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tokens[addr] == tok {
		delete(t.tokens, addr)
	}
}
