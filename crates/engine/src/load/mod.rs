//! Building an engine for a program: the tables, registers, counters, meters and value sets, the
//! extern instances and their methods, the per-header plans, and the program compiled into
//! closures.

pub(crate) mod assigns;
pub(crate) mod checksums;
pub(crate) mod compile;
pub(crate) mod context;
pub(crate) mod expressions;
pub(crate) mod plans;
pub(crate) mod pristine;
pub(crate) mod statements;
pub(crate) mod unwritten;
pub(crate) mod writes;

use crate::engine::{
    Controls, Deparser, Digests, Engine, ErrorCodes, Externs, Layout, MatchAction, Parser, Pre,
    RegisterRt, Replication, TableRt,
};
use crate::load::compile::Code;
use crate::load::plans::{HeaderPlan, StdSlots};
use crate::meters::MeterCell;
use crate::native;
use crate::pipeline::{call, match_action};
use crate::tables::{self, TableData};
use crate::Backend;
use arc_swap::ArcSwap;
use p4sec_externs::iface::{BitBuf, ExternType, MethodSig};
use p4sec_ir::*;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

fn err_code(p: &Program, name: &str) -> u32 {
    p.error_code(name).unwrap_or(0)
}

impl Engine {
    /// Build the runtime for `prog`; extern instances are created from `externs` by type name. The
    /// backend is the one `P4SEC_ENGINE` names ([`Backend::from_env`]; an invalid value is an
    /// error).
    pub fn new(prog: Arc<Program>, externs: &[Box<dyn ExternType>]) -> Result<Engine, String> {
        Engine::with_backend(prog, externs, Backend::from_env()?)
    }

    /// [`Engine::new`] with the backend given: the closures, or machine code generated when the
    /// program is loaded (`native/`; the closures where the code generator is unavailable).
    pub fn with_backend(
        prog: Arc<Program>,
        externs: &[Box<dyn ExternType>],
        backend: Backend,
    ) -> Result<Engine, String> {
        let mut fast = (*prog).clone();
        fast.optimize();
        let prog = Arc::new(fast);
        let mut tables = vec![];
        let mut key_layouts = vec![];
        for t in &prog.tables {
            for e in &t.entries {
                tables::validate_entry(&prog, t, e)?;
            }
            // (native code reads narrow LPM tables' hit maps; the closures do not)
            let mut d = TableData::with_hit_maps(t, backend == Backend::Native)?;
            d.default_writes = match_action::param_writes(&prog, &d.default);
            tables.push(TableRt {
                data: ArcSwap::from_pointee(d),
                write: Mutex::new(()),
                spare: Mutex::new(None),
                recycled: Default::default(),
                copied: Default::default(),
            });
            let mut off = 0;
            let mut l = vec![];
            for k in &t.keys {
                let w = words_for(k.width) as usize;
                l.push((off, w));
                off += w;
            }
            key_layouts.push(l);
        }
        let selectors = prog
            .tables
            .iter()
            .map(|t| match t.implementation {
                Implementation::ActionSelector(p) => {
                    let algo = prog
                        .action_profiles
                        .get(p as usize)
                        .and_then(|p| p.selector)
                        .unwrap_or(HashAlgo::Crc16);
                    Some((
                        algo,
                        t.keys
                            .iter()
                            .enumerate()
                            .filter(|(_, k)| k.kind == MatchKind::Selector)
                            .map(|(i, _)| i)
                            .collect(),
                    ))
                }
                _ => None,
            })
            .collect();
        let registers = prog
            .registers
            .iter()
            .map(|r| {
                let words = words_for(r.width) as usize;
                RegisterRt {
                    size: r.size as usize,
                    width: r.width,
                    words,
                    cells: (0..r.size as usize * words)
                        .map(|_| AtomicU64::new(0))
                        .collect(),
                }
            })
            .collect();
        let counters = prog
            .counters
            .iter()
            .map(|c| {
                (0..c.size)
                    .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                    .collect()
            })
            .collect();
        let meters = prog
            .meters
            .iter()
            .map(|m| (0..m.size).map(|_| MeterCell::default()).collect())
            .collect();
        let value_sets = prog
            .value_sets
            .iter()
            .map(|_| ArcSwap::from_pointee(vec![]))
            .collect();
        let mut objs = vec![];
        let mut methods = vec![];
        for inst in &prog.externs {
            let ty = externs
                .iter()
                .find(|t| t.name() == inst.type_name)
                .ok_or_else(|| {
                    format!(
                        "extern `{}` (type `{}`) is not implemented by this switch",
                        inst.name, inst.type_name
                    )
                })?;
            let args: Vec<BitBuf> = inst
                .ctor_args
                .iter()
                .map(|v| {
                    let mut b = BitBuf::zero(v.width);
                    let bytes: Vec<u8> =
                        v.words.iter().rev().flat_map(|w| w.to_be_bytes()).collect();
                    b.set_bytes(&bytes);
                    b
                })
                .collect();
            let obj = ty.instantiate(&inst.name, &args)?;
            let mut ms = vec![];
            for m in &inst.methods {
                let sig = MethodSig {
                    name: m.name.clone(),
                    args: m.args.iter().map(|(d, w)| (call::dir_of(*d), *w)).collect(),
                    ret: m.ret,
                };
                ms.push(
                    obj.resolve(&sig)
                        .map_err(|e| format!("extern `{}`: method `{}`: {e}", inst.name, m.name))?,
                );
            }
            objs.push(obj);
            methods.push(ms);
        }
        let mut header_ranges = vec![];
        for h in &prog.headers {
            header_ranges.push((h.valid.slot as usize, 1));
            for f in &h.fields {
                header_ranges.push((f.loc.slot as usize, words_for(f.loc.width) as usize));
                if let Some(l) = f.varbit_len {
                    header_ranges.push((l.slot as usize, 1));
                }
            }
        }
        for s in &prog.stacks {
            header_ranges.push((s.next_index.slot as usize, 1));
        }
        let hplans = prog.headers.iter().map(HeaderPlan::new).collect();
        let pristine = pristine::Pristine::analyse(&prog);
        let cx = compile::Cx {
            prog: &prog,
            externs: &objs,
            methods: &methods,
            pristine: &pristine,
        };
        let mut code = compile::compile(&cx);
        let backend = match backend {
            Backend::Native if native::compile(&cx, &mut code).is_some() => Backend::Native,
            _ => Backend::Closure,
        };
        let one_word_key = prog
            .tables
            .iter()
            .map(|t| matches!(&t.keys[..], [k] if k.width <= 64))
            .collect();
        let entry_state = prog
            .tables
            .iter()
            .map(|t| t.direct_counter.is_some() || t.direct_meter.is_some() || t.support_timeout)
            .collect();
        // a slot beyond the program's (a malformed program) becomes the worker's sink slot:
        // parameter words are written unchecked
        let param_words: Vec<Vec<_>> = prog
            .actions
            .iter()
            .map(|a| {
                match_action::param_word_layout(a)
                    .map(|(s, m, p, k)| (s.min(prog.slots), m, p, k))
                    .collect()
            })
            .collect();
        let Code {
            states,
            select_keys,
            select_cases,
            lean_next,
            verify,
            tracked_headers,
            deferred,
            ingress,
            egress,
            compute,
            deparser,
            actions,
            table_keys,
            native_stages,
        } = code;
        Ok(Engine {
            layout: Layout {
                headers: hplans,
                header_ranges,
                std: StdSlots::new(&prog),
                errors: ErrorCodes {
                    too_short: err_code(&prog, "PacketTooShort"),
                    no_match: err_code(&prog, "NoMatch"),
                    stack_oob: err_code(&prog, "StackOutOfBounds"),
                    header_too_short: err_code(&prog, "HeaderTooShort"),
                    timeout: err_code(&prog, "ParserTimeout"),
                    invalid_arg: err_code(&prog, "ParserInvalidArgument"),
                },
            },
            parser: Parser {
                states,
                select_keys,
                select_cases,
                lean_next,
                value_sets,
                max_steps: crate::engine::MAX_PARSER_STEPS,
            },
            controls: Controls {
                verify,
                tracked_headers,
                ingress,
                egress,
                lane: crate::engine::Lane::of(
                    &native_stages,
                    compute.is_empty(),
                    prog.slots as usize + 1,
                ),
                compute,
                native: native_stages,
            },
            match_action: MatchAction {
                tables,
                key_layouts,
                table_keys,
                selectors,
                one_word_key,
                entry_state,
                actions,
                arg_plans: param_words
                    .iter()
                    .map(|w| match_action::arg_plan::ArgPlan::of(w, prog.slots))
                    .collect(),
                param_words,
                version: AtomicU64::new(0),
                publish_lock: Mutex::new(()),
                profiles: Default::default(),
            },
            externs: Externs {
                instances: objs,
                methods,
                registers,
                counters,
                meters,
            },
            deparser: Deparser {
                block: deparser,
                deferred,
            },
            replication: Replication {
                config: ArcSwap::from_pointee(Pre::default()),
                write: Mutex::new(()),
            },
            digests: Digests {
                queue: Mutex::new(VecDeque::new()),
                pending: std::sync::atomic::AtomicBool::new(false),
            },
            worker_stats: Mutex::new(vec![]),
            prog,
            backend,
        })
    }
}
