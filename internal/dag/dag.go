// Package dag orders the steps of a plan: it finds an execution order, the nodes
// that can never run because they are in or behind a cycle, and the edges the
// executor follows to dispatch a step the moment its dependencies finish.
//
// Everything here is O(nodes + edges) and allocation-light: the executor builds
// one Graph per plan it validates.
package dag

// Graph is a dependency graph over nodes 0..n-1. An edge d → i means node i waits
// on node d.
type Graph struct {
	indegree []int32
	// dependents of node i are next[start[i]:start[i+1]] (compressed rows).
	start []int32
	next  []int32
}

// New builds a graph in which node i waits on every node in deps[i]. Each
// index in deps must lie in [0, len(deps)); a node may wait on itself, which
// Order reports as a cycle. Repeated edges count once.
func New(deps [][]int) *Graph {
	n := len(deps)
	g := &Graph{indegree: make([]int32, n), start: make([]int32, n+1)}
	// mark[d] == i+1 when the edge d → i was seen already: repeated edges
	// would decrement twice later.
	mark := make([]int32, n)
	for i, ds := range deps {
		for _, d := range ds {
			if mark[d] == int32(i+1) {
				continue
			}
			mark[d] = int32(i + 1)
			g.start[d+1]++
			g.indegree[i]++
		}
	}
	for i := 0; i < n; i++ {
		g.start[i+1] += g.start[i]
	}
	g.next = make([]int32, g.start[n])
	fill := make([]int32, n)
	copy(fill, g.start[:n])
	clear(mark)
	for i, ds := range deps {
		for _, d := range ds {
			if mark[d] == int32(i+1) {
				continue
			}
			mark[d] = int32(i + 1)
			g.next[fill[d]] = int32(i)
			fill[d]++
		}
	}
	return g
}

// Len is the number of nodes.
func (g *Graph) Len() int { return len(g.indegree) }

// Indegree is the number of distinct nodes node i waits on.
func (g *Graph) Indegree(i int) int { return int(g.indegree[i]) }

// Dependents are the nodes that wait on node i. The slice belongs to the graph.
func (g *Graph) Dependents(i int) []int32 { return g.next[g.start[i]:g.start[i+1]] }

// Order returns the nodes in an order in which every node comes after all it
// waits on (Kahn's algorithm, stable: among ready nodes the lower index goes
// first). Nodes that can never become ready are returned in blocked, ascending:
// those in a cycle and those that wait, directly or not, on one.
func (g *Graph) Order() (order, blocked []int) {
	n := g.Len()
	in := make([]int32, n)
	copy(in, g.indegree)
	order = make([]int, 0, n)
	for i := 0; i < n; i++ {
		if in[i] == 0 {
			order = append(order, i)
		}
	}
	for head := 0; head < len(order); head++ {
		for _, j := range g.Dependents(order[head]) {
			in[j]--
			if in[j] == 0 {
				order = append(order, int(j))
			}
		}
	}
	if len(order) == n {
		return order, nil
	}
	for i := 0; i < n; i++ {
		if in[i] > 0 {
			blocked = append(blocked, i)
		}
	}
	return order, blocked
}

// InCycle reports, for each node in blocked (as returned by Order), whether it
// lies on a cycle itself (true) or only waits on one (false). It runs Tarjan's
// strongly-connected-components algorithm over the blocked nodes only.
func (g *Graph) InCycle(blocked []int) []bool {
	n := g.Len()
	isBlocked := make([]bool, n)
	for _, b := range blocked {
		isBlocked[b] = true
	}
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	cyclic := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var counter int32
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = counter, counter
		counter++
		stack = append(stack, v)
		onStack[v] = true
		for _, w32 := range g.Dependents(v) {
			w := int(w32)
			if !isBlocked[w] {
				continue
			}
			if w == v {
				cyclic[v] = true
			}
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		// v is the root of a component; pop it.
		top := len(stack) - 1
		for stack[top] != v {
			top--
		}
		comp := stack[top:]
		if len(comp) > 1 {
			for _, c := range comp {
				cyclic[c] = true
			}
		}
		for _, c := range comp {
			onStack[c] = false
		}
		stack = stack[:top]
	}
	for _, b := range blocked {
		if index[b] < 0 {
			visit(b)
		}
	}
	out := make([]bool, len(blocked))
	for k, b := range blocked {
		out[k] = cyclic[b]
	}
	return out
}
