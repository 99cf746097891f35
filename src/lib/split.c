/*
 * split.c - helper threads for the parts of one large piece of work (see
 * split.h).  A call puts its parts 1..n-1 on a queue (a doubly linked
 * list, so the caller can take an untaken one back), runs part 0, then
 * for each offered part either takes it back (no helper has it yet) and
 * runs it, or waits for the helper running it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "split.h"
#include "util.h"

enum { QUEUED, RUNNING, DONE };

struct job {
	struct job *prev, *next;
	int (*fn)(void *arg, size_t i);
	void *arg;
	size_t i;
	int state;
	int rc;
	wstore__first_err *fe;
};

struct wstore__split {
	pthread_mutex_t mu;
	pthread_cond_t work; /* a job was queued, or stop */
	pthread_cond_t done; /* a job is DONE */
	struct job *head, *tail;
	int stop;
	unsigned nth;
	pthread_t th[WSTORE__SPLIT_MAX - 1];
};

static void unlink_job(wstore__split *sp, struct job *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else
		sp->head = j->next;
	if (j->next)
		j->next->prev = j->prev;
	else
		sp->tail = j->prev;
	j->prev = j->next = NULL;
}

/* Run one job on this thread; keeps its error in its own slot. */
static void run_job(struct job *j)
{
	j->rc = j->fn(j->arg, j->i);
	if (j->rc < 0)
		wstore__first_err_keep(j->fe, j->rc);
}

static void *helper_main(void *arg)
{
	wstore__split *sp = arg;
	struct job *j;

	pthread_mutex_lock(&sp->mu);
	for (;;) {
		while (!sp->head && !sp->stop)
			pthread_cond_wait(&sp->work, &sp->mu);
		if (sp->stop)
			break;
		j = sp->head;
		unlink_job(sp, j);
		j->state = RUNNING;
		pthread_mutex_unlock(&sp->mu);
		run_job(j);
		pthread_mutex_lock(&sp->mu);
		j->state = DONE;
		pthread_cond_broadcast(&sp->done);
	}
	pthread_mutex_unlock(&sp->mu);
	return NULL;
}

wstore__split *wstore__split_new(void)
{
	wstore__split *sp = calloc(1, sizeof(*sp));
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned want;

	if (!sp) {
		wstore__errc(-ENOMEM, "cannot start read helpers");
		return NULL;
	}
	want = cores > WSTORE__SPLIT_MAX ? WSTORE__SPLIT_MAX - 1
	       : cores > 1		 ? (unsigned)cores - 1
					 : 0;
	pthread_mutex_init(&sp->mu, NULL);
	pthread_cond_init(&sp->work, NULL);
	pthread_cond_init(&sp->done, NULL);
	while (sp->nth < want &&
	       wstore__thread_start(&sp->th[sp->nth], helper_main, sp) == 0)
		sp->nth++;
	return sp;
}

unsigned wstore__split_width(const wstore__split *sp)
{
	return sp ? sp->nth + 1 : 1;
}

int wstore__split_run(wstore__split *sp, int (*fn)(void *arg, size_t i),
		      void *arg, size_t nparts)
{
	struct job jobs[WSTORE__SPLIT_MAX];
	wstore__first_err fe[WSTORE__SPLIT_MAX];

	if (nparts > WSTORE__SPLIT_MAX)
		nparts = WSTORE__SPLIT_MAX;
	memset(jobs, 0, sizeof(jobs));
	for (size_t i = 0; i < nparts; i++) {
		fe[i].code = 0;
		jobs[i] = (struct job){
			.fn = fn, .arg = arg, .i = i, .fe = &fe[i]
		};
	}
	if (sp && sp->nth && nparts > 1) {
		pthread_mutex_lock(&sp->mu);
		for (size_t i = 1; i < nparts; i++) {
			jobs[i].prev = sp->tail;
			if (sp->tail)
				sp->tail->next = &jobs[i];
			else
				sp->head = &jobs[i];
			sp->tail = &jobs[i];
		}
		pthread_cond_broadcast(&sp->work);
		pthread_mutex_unlock(&sp->mu);
	} else {
		for (size_t i = 1; i < nparts; i++)
			jobs[i].state = RUNNING; /* by us, below */
	}
	run_job(&jobs[0]);
	for (size_t i = 1; i < nparts; i++) {
		int mine = !(sp && sp->nth);

		if (!mine) {
			pthread_mutex_lock(&sp->mu);
			if (jobs[i].state == QUEUED) {
				unlink_job(sp, &jobs[i]);
				jobs[i].state = RUNNING;
				mine = 1;
			}
			while (!mine && jobs[i].state != DONE)
				pthread_cond_wait(&sp->done, &sp->mu);
			pthread_mutex_unlock(&sp->mu);
		}
		if (mine)
			run_job(&jobs[i]);
	}
	for (size_t i = 0; i < nparts; i++)
		if (jobs[i].rc < 0)
			return wstore__first_err_raise(&fe[i]);
	return 0;
}

void wstore__split_free(wstore__split *sp)
{
	if (!sp)
		return;
	pthread_mutex_lock(&sp->mu);
	sp->stop = 1;
	pthread_cond_broadcast(&sp->work);
	pthread_mutex_unlock(&sp->mu);
	for (unsigned i = 0; i < sp->nth; i++)
		pthread_join(sp->th[i], NULL);
	pthread_cond_destroy(&sp->done);
	pthread_cond_destroy(&sp->work);
	pthread_mutex_destroy(&sp->mu);
	free(sp);
}
