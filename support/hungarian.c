// support/hungarian.c -- the linear assignment solver of
// linear_sum_assignment, shared by the interpreter (ir/interp.c), compiled
// code (linked into every model.so with the rest of this library) and the
// CUDA runtime's host step, so all return the same assignment, ties
// included.
//
// The Hungarian method with potentials (Kuhn-Munkres in the O(n^2 m) form
// of Jonker-Volgenant / e-maxx): rows are added one at a time, and a
// Dijkstra-like search over reduced costs a(i, j) - u[i] - v[j] >= 0 finds
// the cheapest augmenting path.  It needs n <= m, so with more rows than
// columns the transposed problem is solved (a(i, j) = c[i rs + j cs], no
// copy) and the rows left over get -1.  Arrays are 1-based with column 0 as
// the search's virtual root.  +inf costs are forbidden pairs; when no
// finite path remains the problem is infeasible.  Scanning columns in
// order with strict comparisons makes ties deterministic.
//
// Memory: the caller passes the scratch (ir_assignment_work bytes), so a
// compiled task takes it from its arena and allocates nothing when it runs.
#include <math.h>
#include <string.h>

#include "support.h"

// The scratch layout for n rows (the smaller side) and m columns: doubles
// u[n+1], v[m+1], minv[m+1]; int64 p[m+1], way[m+1], col[n]; bytes used[m+1].
size_t
ir_assignment_work(int64_t rows, int64_t cols)
{
	int64_t n = rows < cols ? rows : cols, m = rows < cols ? cols : rows;
	return sizeof(double) * (size_t)(n + 1 + 2 * (m + 1)) +
	       sizeof(int64_t) * (size_t)(2 * (m + 1) + n) + (size_t)(m + 1);
}

static int
solve(const double *c, int64_t n, int64_t m, int64_t rs, int64_t cs, int64_t *col, void *work)
{
	double *u = work, *v = u + n + 1, *minv = v + m + 1;
	int64_t *p = (int64_t *)(minv + m + 1), *way = p + m + 1;
	char *used = (char *)(way + m + 1 + n);
	for (int64_t j = 0; j <= m; j++)
		v[j] = 0, p[j] = 0, way[j] = 0;
	for (int64_t i = 0; i <= n; i++)
		u[i] = 0;
	for (int64_t i = 1; i <= n; i++) {
		p[0] = i;
		int64_t j0 = 0;
		for (int64_t j = 0; j <= m; j++) {
			minv[j] = INFINITY;
			used[j] = 0;
		}
		do {
			used[j0] = 1;
			int64_t i0 = p[j0], j1 = -1;
			double delta = INFINITY;
			for (int64_t j = 1; j <= m; j++) {
				if (used[j])
					continue;
				double cur = c[(i0 - 1) * rs + (j - 1) * cs] - u[i0] - v[j];
				if (cur < minv[j]) {
					minv[j] = cur;
					way[j] = j0;
				}
				if (minv[j] < delta) {
					delta = minv[j];
					j1 = j;
				}
			}
			if (j1 < 0)
				return 0; // every free column is forbidden: infeasible
			for (int64_t j = 0; j <= m; j++)
				if (used[j]) {
					u[p[j]] += delta;
					v[j] -= delta;
				} else
					minv[j] -= delta;
			j0 = j1;
		} while (p[j0] != 0);
		do { // augment along the path
			int64_t j1 = way[j0];
			p[j0] = p[j1];
			j0 = j1;
		} while (j0);
	}
	for (int64_t j = 1; j <= m; j++)
		if (p[j])
			col[p[j] - 1] = j - 1;
	return 1;
}

int
ir_assignment(const double *cost, int64_t rows, int64_t cols, int64_t *col, void *work)
{
	for (int64_t i = 0; i < rows * cols; i++)
		if (isnan(cost[i]) || cost[i] == -INFINITY)
			return 0;
	if (rows <= cols)
		return solve(cost, rows, cols, cols, 1, col, work) ? 1 : -1;
	// The transpose: for each column, its row; then invert.
	int64_t *rowof = (int64_t *)((double *)work + cols + 1 + 2 * (rows + 1)) + 2 * (rows + 1);
	if (!solve(cost, cols, rows, 1, cols, rowof, work))
		return -1;
	for (int64_t i = 0; i < rows; i++)
		col[i] = -1;
	for (int64_t j = 0; j < cols; j++)
		col[rowof[j]] = j;
	return 1;
}
