package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Cluster is a Redis Cluster of real redis-server processes: three
// primaries, each with one replica, made by `redis-cli --cluster create`,
// stopped when the test ends. Every node keeps the append-only file of
// Start, synced at every write.
type Cluster struct {
	t     testing.TB
	Nodes []*Server
}

// clusterNodeTimeout is the cluster's node timeout: how long a node may
// be silent before the others count it failed and its replica takes over.
const clusterNodeTimeout = 2000 * time.Millisecond

// StartCluster starts six cluster nodes on free ports, makes them a
// cluster of three primaries with one replica each, and waits until every
// node reports the cluster ok, every slot served, and every replica in
// sync with its primary.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	Binary(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("this test needs redis-cli, which is not on PATH: install it (Debian: apt-get install -y redis-tools) — %v", err)
	}
	c := &Cluster{t: t}
	for range 6 {
		s := &Server{t: t, fsync: "always", dir: t.TempDir()}
		t.Cleanup(func() { s.kill() })
		for try := 1; ; try++ {
			s.port = freePort(t)
			// The cluster bus listens on a port of its own, free too (the
			// default, port+10000, may be past 65535).
			s.extra = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())),
				"--cluster-port", strconv.Itoa(freePort(t))}
			err := s.launch()
			if err == nil {
				break
			}
			if try == 5 {
				t.Fatal(err)
			}
			t.Logf("%v; trying another port", err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	for _, s := range c.Nodes {
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK()
	return c
}

// URL returns the cluster's redis+cluster:// URL, naming every primary
// as a seed.
func (c *Cluster) URL() string {
	var seeds []string
	for _, s := range c.Nodes {
		seeds = append(seeds, s.Addr())
	}
	return "redis+cluster://" + strings.Join(seeds, ",") + "/0"
}

// WaitOK waits until every running node says the cluster is ok with all
// 16384 slots served, all nodes agree which node serves each slot, and
// every replica's link to its primary is up and caught up: the
// cluster's own report of it, asked for again each time (every 20 ms)
// until it holds.
func (c *Cluster) WaitOK() {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var why string
	for {
		if why = c.notOK(); why == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the Redis Cluster is not ok after 60s: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notOK says why the cluster is not yet ok, or "" when it is.
func (c *Cluster) notOK() string {
	ctx := context.Background()
	var views []string
	named := map[string]bool{}
	for _, s := range c.running() {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			cl.Close()
			return fmt.Sprintf("%s: %v", s.Addr(), err)
		}
		if !strings.Contains(info, "cluster_state:ok\r\n") || !strings.Contains(info, "cluster_slots_ok:16384\r\n") {
			cl.Close()
			return fmt.Sprintf("%s: %s", s.Addr(), info)
		}
		//lint:ignore SA1019 CLUSTER SLOTS names each range's primary first, as this needs; Redis 7 still serves it
		slots, err := cl.ClusterSlots(ctx).Result()
		if err != nil {
			cl.Close()
			return fmt.Sprintf("%s: %v", s.Addr(), err)
		}
		var view []string
		for _, r := range slots {
			v := fmt.Sprintf("%d-%d:%s", r.Start, r.End, r.Nodes[0].Addr)
			var reps []string
			named[r.Nodes[0].Addr] = true
			for _, n := range r.Nodes[1:] {
				reps = append(reps, n.Addr)
				named[n.Addr] = true
			}
			slices.Sort(reps)
			view = append(view, v+"+"+strings.Join(reps, "+"))
		}
		slices.Sort(view)
		views = append(views, strings.Join(view, " "))
		repl, err := cl.Info(ctx, "replication").Result()
		cl.Close()
		if err != nil {
			return fmt.Sprintf("%s: %v", s.Addr(), err)
		}
		if strings.Contains(repl, "role:slave\r\n") && !strings.Contains(repl, "master_link_status:up\r\n") {
			return fmt.Sprintf("%s: replica link not up", s.Addr())
		}
	}
	for _, v := range views[1:] {
		if v != views[0] {
			return fmt.Sprintf("nodes disagree on the slots: %q vs %q", views[0], v)
		}
	}
	// Every running node serves slots or replicates a node that does.
	if len(named) != len(c.running()) {
		return fmt.Sprintf("the slots name %d nodes of %d: %s", len(named), len(c.running()), views[0])
	}
	return ""
}

// running returns the nodes that have not been stopped.
func (c *Cluster) running() []*Server {
	var out []*Server
	for _, s := range c.Nodes {
		select {
		case <-s.done:
		default:
			out = append(out, s)
		}
	}
	return out
}

// node returns the Server listening at addr.
func (c *Cluster) node(addr string) *Server {
	c.t.Helper()
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	c.t.Fatalf("no node of the cluster listens at %s", addr)
	return nil
}

// PrimaryFor returns the node that serves key's slot now, and its
// replica.
func (c *Cluster) PrimaryFor(key string) (primary, replica *Server) {
	c.t.Helper()
	ctx := context.Background()
	cl := c.running()[0].Client()
	slot, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	//lint:ignore SA1019 CLUSTER SLOTS names each range's primary first, as this needs; Redis 7 still serves it
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) {
			if len(r.Nodes) < 2 {
				c.t.Fatalf("slot %d has no replica: %+v", slot, r)
			}
			return c.node(r.Nodes[0].Addr), c.node(r.Nodes[1].Addr)
		}
	}
	c.t.Fatalf("no node serves slot %d", slot)
	return nil, nil
}

// Failover makes replica its primary's primary, as an operator does with
// CLUSTER FAILOVER on it (the primary stops taking writes until the
// replica has all of them), and waits until the cluster is ok again with
// replica serving the slots.
func (c *Cluster) Failover(replica *Server) {
	c.t.Helper()
	c.failover(replica, "")
}

// Takeover makes replica a primary without its primary's agreement or
// the other primaries' votes (CLUSTER FAILOVER TAKEOVER), as an operator
// does when its primary is lost, with whatever data the replica has, and
// waits until the cluster is ok again with replica serving the slots.
func (c *Cluster) Takeover(replica *Server) {
	c.t.Helper()
	c.failover(replica, "TAKEOVER")
}

func (c *Cluster) failover(replica *Server, how string) {
	c.t.Helper()
	cl := replica.Client()
	args := []any{"CLUSTER", "FAILOVER"}
	if how != "" {
		args = append(args, how)
	}
	if err := cl.Do(context.Background(), args...).Err(); err != nil {
		c.t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.Addr(), err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		repl, err := cl.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(repl, "role:master\r\n") && c.notOK() == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s did not take over: %v %s; %s", replica.Addr(), err, repl, c.notOK())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CutReplica stops replica (SIGSTOP) and closes its primary's
// connections to its replicas, so that nothing the primary is sent from
// now on reaches it, even once it is resumed.
func (c *Cluster) CutReplica(primary, replica *Server) {
	c.t.Helper()
	replica.Pause()
	if err := primary.Client().Do(context.Background(), "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		c.t.Fatalf("CLIENT KILL TYPE replica on %s: %v", primary.Addr(), err)
	}
}
