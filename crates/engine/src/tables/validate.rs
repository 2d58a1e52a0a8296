//! Entries and actions checked against the table's declaration before they are installed.

use p4sec_ir::{ActionCall, FieldMatch, MatchKind, Table, TableEntry, Value};

/// Check an entry against the table's declaration: key count, kinds, widths, action and arguments.
pub fn validate_entry(prog: &p4sec_ir::Program, t: &Table, e: &TableEntry) -> Result<(), String> {
    let keys: Vec<_> = t.keys.iter().collect();
    if e.matches.len() != keys.len() {
        return Err(format!(
            "table `{}` has {} key fields, the entry gives {}",
            t.name,
            keys.len(),
            e.matches.len()
        ));
    }
    let fits = |v: &Value, w: u32| -> bool {
        v.words.iter().enumerate().all(|(i, x)| {
            let lo = i as u32 * 64;
            if lo >= w {
                *x == 0
            } else if w - lo >= 64 {
                true
            } else {
                *x >> (w - lo) == 0
            }
        })
    };
    for (m, k) in e.matches.iter().zip(keys) {
        let ok = match (m, k.kind) {
            (FieldMatch::Exact(v), MatchKind::Exact | MatchKind::Selector) => fits(v, k.width),
            (FieldMatch::Ternary { value, mask }, MatchKind::Ternary) => {
                fits(value, k.width) && fits(mask, k.width)
            }
            (FieldMatch::Lpm { value, prefix_len }, MatchKind::Lpm) => {
                fits(value, k.width) && *prefix_len <= k.width
            }
            (FieldMatch::Range { lo, hi }, MatchKind::Range) => {
                fits(lo, k.width) && fits(hi, k.width)
            }
            (FieldMatch::Optional(v), MatchKind::Optional) => {
                v.as_ref().map(|v| fits(v, k.width)).unwrap_or(true)
            }
            (
                FieldMatch::Any,
                MatchKind::Ternary
                | MatchKind::Lpm
                | MatchKind::Range
                | MatchKind::Optional
                | MatchKind::Selector,
            ) => true,
            _ => false,
        };
        if !ok {
            return Err(format!(
                "table `{}`: the match for key `{}` ({:?}, {} bits) is invalid or does not fit",
                t.name, k.name, k.kind, k.width
            ));
        }
    }
    validate_action(prog, t, &e.action, false)
}

pub fn validate_action(
    prog: &p4sec_ir::Program,
    t: &Table,
    a: &ActionCall,
    default: bool,
) -> Result<(), String> {
    let Some(ta) = t.actions.iter().find(|x| x.action == a.action) else {
        return Err(format!(
            "action {} is not an action of table `{}`",
            a.action, t.name
        ));
    };
    if !default && ta.default_only {
        return Err(format!(
            "action `{}` may only be the default action of table `{}`",
            prog.actions[a.action as usize].name, t.name
        ));
    }
    if default && ta.table_only {
        return Err(format!(
            "action `{}` cannot be the default action of table `{}`",
            prog.actions[a.action as usize].name, t.name
        ));
    }
    let act = &prog.actions[a.action as usize];
    if act.params.len() != a.args.len() {
        return Err(format!(
            "action `{}` takes {} arguments, {} given",
            act.name,
            act.params.len(),
            a.args.len()
        ));
    }
    for (p, v) in act.params.iter().zip(&a.args) {
        let w = p.loc.width;
        let ok = v.words.iter().enumerate().all(|(i, x)| {
            let lo = i as u32 * 64;
            lo >= w && *x == 0 || lo < w && (w - lo >= 64 || *x >> (w - lo) == 0)
        });
        if !ok {
            return Err(format!(
                "argument `{}` of action `{}` does not fit in {w} bits",
                p.name, act.name
            ));
        }
    }
    Ok(())
}
