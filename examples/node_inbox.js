#!/usr/bin/env node
// A deliberately simple durable inbox, and the inboxsim adapter around it.
//
// Node's standard library only (Node 18 or newer). Run it the way the harness does:
//
//     inboxsim conformance --adapter "node node_inbox.js"
//
// The adapter protocol (version 1) is docs/protocol.md in the inboxsim repository
// (protocol.md beside this file if `inboxsim init-adapter` wrote it). One JSON
// request per line on stdin, one JSON response per line on stdout, logging on stderr.
//
// How this inbox works, in four rules:
//
// 1. Everything durable is one JSON file, $INBOXSIM_DATA_DIR/inbox.json: each
//    session's event log, pending inbox and transcript, which session and kind
//    every input ID belongs to, and the counter behind generated IDs.
// 2. A request is a transaction. It changes the state in memory; when it
//    succeeds the file is rewritten (temporary file, fsync, rename) before the
//    response is sent, so an acknowledged request survives a SIGKILL; when it
//    fails the state is read back from the file, so an error changes nothing.
// 3. Executions are volatile. Open model calls, follow-up doorbells and step
//    counters live in memory only (this.runs): a restart loses running work,
//    never the inbox.
// 4. Work runs inside the request that made it ready, until every session is
//    idle or waiting on an open model call (the protocol's quiescence rule).
//
// Features: synthetic, compaction, resume, interrupt. Not fork, revert or
// failpoints: docs/protocol.md ("Growing the example") says how to add them.
//
// INBOXSIM_EXAMPLE_BUG=1 plants a bug (a boundary promotes every queued input
// at once instead of the oldest), to see what a failure looks like.

'use strict';

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const IMPLEMENTATION = 'example-node-inbox 1.0';
const FEATURES = ['synthetic', 'compaction', 'resume', 'interrupt'];
const BUG = !['', '0', undefined].includes(process.env.INBOXSIM_EXAMPLE_BUG);
const CONFLICT = { user: 'prompt_conflict', synthetic: 'synthetic_conflict' };

class Refused extends Error {
  // An error response: a protocol error code and a message.
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

// JSON text that is equal exactly when two payloads are equal as JSON values
// (sorted keys; JSON.parse already reads 1.0 as 1, so numbers compare by value).
function canonical(value) {
  if (Array.isArray(value)) return '[' + value.map(canonical).join(',') + ']';
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonical(value[k])).join(',') + '}';
  }
  return JSON.stringify(value);
}

const sameOwner = (owner, sid, kind) => owner[0] === sid && owner[1] === kind;
const show = (value) => JSON.stringify(value);

class Inbox {
  constructor(folder) {
    this.path = path.join(folder, 'inbox.json');
    this.saved = ''; // the file's text, to skip rewriting it unchanged
    this.state = this.load();
    this.runs = new Map(); // volatile: session -> its execution
    this.now = 0;
    this.stepLimit = 4;
  }

  // --- the durable file ------------------------------------------------------------

  load() {
    if (!fs.existsSync(this.path)) return { sessions: {}, owners: {}, counter: 0 };
    this.saved = fs.readFileSync(this.path, 'utf8');
    return JSON.parse(this.saved);
  }

  save() {
    const text = JSON.stringify(this.state);
    if (text === this.saved) return;
    const tmp = this.path + '.tmp';
    const fd = fs.openSync(tmp, 'w');
    fs.writeSync(fd, text);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fs.renameSync(tmp, this.path); // atomic: a kill leaves the old file or the new one
    this.saved = text;
  }

  handle(req) {
    const handler = this['op_' + req.op];
    if (typeof handler !== 'function') {
      throw new Refused('unsupported', `operation ${show(req.op)} is not supported`);
    }
    this.now = Math.max(this.now, req.now); // the harness's clock is the only clock
    let result;
    try {
      result = handler.call(this, req);
    } catch (error) {
      if (error instanceof Refused) this.state = this.load(); // throw away anything half done
      throw error;
    }
    this.save();
    return result;
  }

  // --- small helpers ---------------------------------------------------------------

  session(req) {
    const session = this.state.sessions[req.session];
    if (session === undefined) {
      throw new Refused('session_not_found', `session ${show(req.session)} does not exist`);
    }
    return session;
  }

  // Append one event to the session's log; returns its seq.
  append(sid, type, input, data = {}) {
    const events = this.state.sessions[sid].events;
    const event = { seq: events.length, type, time: this.now, data };
    if (input !== null) event.input = input;
    events.push(event);
    return event.seq;
  }

  // A generated ID: never one that was ever admitted (owners keep every ID).
  freshId(prefix) {
    for (;;) {
      this.state.counter += 1;
      const candidate = prefix + this.state.counter;
      if (!(candidate in this.state.owners)) return candidate;
    }
  }

  barrier(sid) {
    return this.state.sessions[sid].pending.find((row) => row.type === 'compaction') || null;
  }

  // --- setup and queries -----------------------------------------------------------

  op_hello(req) {
    if ('step_limit' in req) {
      const limit = req.step_limit;
      if (!Number.isInteger(limit) || limit < 1) {
        throw new Refused('invalid_request', `step_limit must be a positive integer: ${show(limit)}`);
      }
      this.stepLimit = limit;
    }
    return { protocol: 1, implementation: IMPLEMENTATION, features: FEATURES, step_limit: this.stepLimit };
  }

  op_create(req) {
    if (!(req.session in this.state.sessions)) {
      this.state.sessions[req.session] = { events: [], pending: [], messages: [] };
    }
    return { session: req.session }; // an existing session is adopted
  }

  op_log(req) {
    const after = req.after === undefined ? -1 : req.after;
    return { events: this.session(req).events.filter((e) => e.seq > after) };
  }

  op_pending(req) {
    const rows = this.session(req).pending;
    return {
      pending: rows.map((r) => ({
        input: r.input, type: r.type, delivery: r.delivery, admitted_seq: r.admitted_seq, time: r.time,
      })),
    };
  }

  op_messages(req) {
    const messages = this.session(req).messages;
    return { messages: messages.map((m) => ({ id: m.id, type: m.type, seq: m.seq, time: m.time })) };
  }

  op_calls() {
    const runs = [...this.runs.values()].sort((a, b) => a.opened - b.opened);
    return { calls: runs.map((run) => run.call) };
  }

  // --- admission -------------------------------------------------------------------

  op_prompt(req) {
    const data = {
      text: req.text,
      files: req.files === undefined ? [] : req.files,
      agents: req.agents === undefined ? [] : req.agents,
      metadata: req.metadata === undefined ? {} : req.metadata,
    };
    return this.admit(req, 'user', data);
  }

  op_synthetic(req) {
    const data = {
      text: req.text,
      description: req.description === undefined ? null : req.description,
      metadata: req.metadata === undefined ? {} : req.metadata,
    };
    return this.admit(req, 'synthetic', data);
  }

  admit(req, kind, data) {
    const session = this.session(req);
    const sid = req.session;
    const delivery = req.delivery === undefined ? 'steer' : req.delivery;
    if (delivery !== 'steer' && delivery !== 'queue') {
      throw new Refused('invalid_request', `delivery must be steer or queue: ${show(delivery)}`);
    }
    let input = req.input;
    let receipt = null;
    if (input === undefined) {
      input = this.freshId('in-');
    } else {
      // An input ID belongs to one session and one kind, for good.
      const owner = this.state.owners[input];
      if (owner !== undefined && !sameOwner(owner, sid, kind)) {
        throw new Refused(CONFLICT[kind], `input ${show(input)} belongs to ${show(owner)}`);
      }
      // While it is pending or visible, a reuse is a retry: same payload and
      // delivery, or a conflict. Judged against the admission record.
      const records = session.pending.concat(session.messages.map((m) => m.receipt));
      receipt = records.find((r) => r.input === input) || null;
      // Otherwise its lifecycle ended: a new input of the same session and kind.
    }
    if (receipt !== null) {
      this.judgeRetry(receipt, kind, data, delivery);
    } else {
      const seq = this.append(sid, 'admitted', input, { data, delivery, type: kind });
      receipt = { input, session: sid, type: kind, data, delivery, admitted_seq: seq, time: this.now };
      session.pending.push(receipt);
      this.state.owners[input] = [sid, kind];
    }
    if (req.resume !== false) this.wake(sid); // an exact retry wakes the session too
    return receipt;
  }

  judgeRetry(record, kind, data, delivery) {
    if (canonical(record.data) !== canonical(data) || record.delivery !== delivery) {
      throw new Refused(CONFLICT[kind], `input ${show(record.input)} was admitted differently`);
    }
  }

  op_compact(req) {
    this.session(req);
    const sid = req.session;
    let input = req.input;
    const owner = input === undefined ? undefined : this.state.owners[input];
    if (owner !== undefined && !sameOwner(owner, sid, 'compaction')) {
      throw new Refused('compaction_conflict', `input ${show(input)} belongs to ${show(owner)}`);
    }
    let receipt = this.barrier(sid); // a session has at most one barrier: requests coalesce
    if (receipt === null) {
      if (input === undefined) input = this.freshId('cmp-');
      const seq = this.append(sid, 'compaction_admitted', input);
      receipt = {
        input, session: sid, type: 'compaction', data: {}, delivery: null, admitted_seq: seq, time: this.now,
      };
      this.state.sessions[sid].pending.push(receipt);
      this.state.owners[input] = [sid, 'compaction'];
    }
    this.wake(sid);
    return receipt;
  }

  // --- the runner: wakes, drains, Safe Step Boundaries, model calls ----------------
  // A run (one per active session) is parked at its one open call and remembers
  // where the drain goes on when the call is answered: its phase ('start': a
  // compaction before the first step; 'step'; 'after_step': a compaction after a
  // step), whether the drain is forced, the step index, whether the step asked
  // for a continuation, and the doorbell (a wake rung while it ran).

  wake(sid) {
    if (this.runs.has(sid)) {
      this.runs.get(sid).doorbell = true; // one follow-up drain, however many wakes
    } else if (this.state.sessions[sid].pending.length > 0) {
      this.append(sid, 'execution_started', null);
      this.startDrain(sid, false, false);
    }
  }

  op_resume(req) {
    this.session(req);
    if (!this.runs.has(req.session)) { // else: join the active execution
      this.append(req.session, 'execution_started', null);
      this.startDrain(req.session, true, false);
    }
    return {};
  }

  startDrain(sid, forced, doorbell) {
    if (!forced && this.state.sessions[sid].pending.length === 0) {
      this.drainDone(sid, doorbell);
    } else if (this.barrier(sid) !== null) {
      this.openCall(sid, 'compaction', 'start', forced, 0, false, doorbell);
    } else {
      this.afterFirstCompaction(sid, forced, doorbell);
    }
  }

  afterFirstCompaction(sid, forced, doorbell) {
    if (forced || this.promotable(sid).length > 0) {
      this.runStep(sid, 'input', 1, forced, doorbell);
    } else {
      this.drainDone(sid, doorbell);
    }
  }

  drainDone(sid, doorbell) {
    if (doorbell) {
      this.startDrain(sid, false, false);
    } else {
      this.append(sid, 'execution_succeeded', null);
      this.runs.delete(sid);
    }
  }

  // Pending user and synthetic input, in admission order; none while a
  // compaction barrier is pending (it blocks all promotion).
  promotable(sid) {
    if (this.barrier(sid) !== null) return [];
    return this.state.sessions[sid].pending.slice();
  }

  // A Safe Step Boundary: promote, then open one step call.
  runStep(sid, scope, step, forced, doorbell) {
    const rows = this.promotable(sid);
    const steers = rows.filter((r) => r.delivery === 'steer');
    const queued = rows.filter((r) => r.delivery === 'queue');
    let batch;
    if (steers.length > 0 || scope === 'steer') {
      batch = steers; // every pending steer joins
    } else {
      batch = BUG ? queued : queued.slice(0, 1); // the oldest queued one (the bug: all of them)
    }
    const session = this.state.sessions[sid];
    for (const row of batch) {
      const seq = this.append(sid, 'promoted', row.input);
      session.pending.splice(session.pending.indexOf(row), 1);
      session.messages.push({ id: row.input, type: row.type, seq, time: this.now, receipt: row });
    }
    if (batch.length > 0) step = 1; // promoted input starts a fresh step allowance
    this.openCall(sid, 'step', 'step', forced, step, false, doorbell);
  }

  openCall(sid, kind, phase, forced, step, cont, doorbell) {
    this.state.counter += 1; // durable, so call IDs never repeat across restarts
    const final = kind === 'step' && step >= this.stepLimit;
    const call = {
      call: 'call-' + this.state.counter,
      session: sid,
      kind,
      step: kind === 'step' ? step : 0, // a compaction call is step 0
      final,
      context: this.state.sessions[sid].messages.map((m) => m.id),
    };
    if (kind === 'step') {
      this.append(sid, 'step_started', null, { final, step });
    } else {
      this.append(sid, 'compaction_started', this.barrier(sid).input, { reason: 'manual' });
    }
    this.runs.set(sid, { call, opened: this.state.counter, phase, forced, step, cont, doorbell });
  }

  op_answer(req) {
    const finish = req.finish;
    if (!['stop', 'tool', 'error'].includes(finish)) {
      throw new Refused('invalid_request', `finish must be stop, tool or error: ${show(finish)}`);
    }
    const run = [...this.runs.values()].find((r) => r.call.call === req.call);
    if (run === undefined) throw new Refused('invalid_request', `call ${show(req.call)} is not open`);
    const call = run.call;
    const sid = call.session;
    this.runs.delete(sid);
    if (call.kind === 'compaction') {
      this.settleCompaction(sid, finish === 'error', 'model call failed');
      if (run.phase === 'start') {
        this.afterFirstCompaction(sid, run.forced, run.doorbell);
      } else {
        this.goOn(sid, run.step, run.cont, run.forced, run.doorbell);
      }
    } else if (finish === 'error') { // the step fails, and with it the execution
      this.append(sid, 'step_failed', null, { step: run.step, error: 'model call failed' });
      this.append(sid, 'execution_failed', null, { error: 'model call failed' });
      if (run.doorbell) this.wake(sid);
    } else {
      this.append(sid, 'step_ended', null, { step: run.step, finish });
      const cont = finish === 'tool' && !call.final; // 'tool' on a final step is 'stop'
      if (this.barrier(sid) !== null) {
        this.openCall(sid, 'compaction', 'after_step', run.forced, run.step, cont, run.doorbell);
      } else {
        this.goOn(sid, run.step, cont, run.forced, run.doorbell);
      }
    }
    return {};
  }

  // After a step: continue it, take pending steers, start on the next queued
  // input, or end the drain.
  goOn(sid, step, cont, forced, doorbell) {
    const rows = this.promotable(sid);
    if (cont || rows.some((r) => r.delivery === 'steer')) {
      this.runStep(sid, 'steer', step + 1, forced, doorbell);
    } else if (rows.length > 0) {
      this.runStep(sid, 'input', 1, forced, doorbell);
    } else {
      this.drainDone(sid, doorbell);
    }
  }

  // The barrier is consumed whether the compaction ended or failed.
  settleCompaction(sid, failed, error) {
    const barrier = this.barrier(sid);
    if (failed) {
      this.append(sid, 'compaction_failed', barrier.input, { reason: 'manual', error });
    } else {
      this.append(sid, 'compaction_ended', barrier.input, { reason: 'manual' });
    }
    const pending = this.state.sessions[sid].pending;
    pending.splice(pending.indexOf(barrier), 1);
  }

  op_interrupt(req) {
    this.session(req);
    const sid = req.session;
    const run = this.runs.get(sid);
    if (run === undefined) return { interrupted: false };
    this.runs.delete(sid);
    if (run.call.kind === 'compaction') {
      this.settleCompaction(sid, true, 'Compaction cancelled');
    } else {
      this.append(sid, 'step_failed', null, { step: run.step, error: 'interrupted' });
    }
    this.append(sid, 'execution_interrupted', null, { reason: 'user' });
    return { interrupted: true }; // pending input stays pending
  }
}

function main() {
  const inbox = new Inbox(process.env.INBOXSIM_DATA_DIR);
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('line', (line) => {
    const request = JSON.parse(line);
    let response;
    try {
      response = { rid: request.rid, ok: true, result: inbox.handle(request) };
    } catch (error) {
      if (!(error instanceof Refused)) throw error; // a bug: die, the harness shows stderr
      response = { rid: request.rid, ok: false, error: { code: error.code, message: error.message } };
    }
    process.stdout.write(JSON.stringify(response) + '\n');
  });
}

main();
