package postgres_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// cluster is a PostgreSQL cluster of the test's own, in a temporary
// directory, that the test may stop and start at will.
type cluster struct {
	bin  string // the directory of initdb and pg_ctl
	as   []string
	data string
	log  string
	port int
}

// serverBinaries finds initdb and pg_ctl: the newest of
// /usr/lib/postgresql/*/bin, else the PATH.
func serverBinaries() (string, bool) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) < version(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], true
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "initdb")); err == nil {
			return filepath.Dir(p), true
		}
	}
	return "", false
}

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// startCluster initialises and starts a cluster, and stops it when the test
// ends. PostgreSQL refuses to run as root, so as root it runs the server as
// the postgres user through runuser, or skips the test when it cannot.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	bin, ok := serverBinaries()
	if !ok {
		unavailable(t, "no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or on the PATH")
	}
	dir := t.TempDir()
	c := &cluster{bin: bin, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "server.log")}
	if os.Geteuid() == 0 {
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Skip("running as root, which PostgreSQL refuses, and there is no runuser to run it as the postgres user")
		}
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root, which PostgreSQL refuses, and there is no postgres user to run it as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// The server's user must reach and own its directory.
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Skipf("running as root and cannot give the cluster's directory to the postgres user: %v", err)
		}
		c.as = []string{runuser, "-u", "postgres", "--"}
	}
	if err := c.exec("initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.pgctl("stop", "-m", "immediate") })
	return c
}

// dsn is the cluster's database URL.
func (c *cluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", c.port)
}

// start starts the server and waits until it takes connections. The data
// survives a crash, not a lost machine (fsync is off): the test only kills
// processes.
func (c *cluster) start() error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c max_connections=200", c.port, c.data)
	if err := c.pgctl("start", "-w", "-t", "60", "-l", c.log, "-o", opts); err != nil {
		log, _ := os.ReadFile(c.log)
		return fmt.Errorf("starting the cluster: %w\n%s", err, log)
	}
	return nil
}

// crash stops the server the way a crash would: every process killed at
// once, nothing flushed, recovery at the next start.
func (c *cluster) crash() error {
	if err := c.pgctl("stop", "-w", "-m", "immediate"); err != nil {
		return fmt.Errorf("stopping the cluster: %w", err)
	}
	return nil
}

func (c *cluster) pgctl(args ...string) error {
	return c.exec("pg_ctl", append([]string{"-D", c.data}, args...)...)
}

func (c *cluster) exec(name string, args ...string) error {
	argv := append(append(append([]string(nil), c.as...), filepath.Join(c.bin, name)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", name, err, out.String())
		}
		return nil
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		return fmt.Errorf("%s did not finish in 90s\n%s", name, out.String())
	}
}
