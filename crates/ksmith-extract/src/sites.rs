//! The repository's calls that build a class, their arguments resolved as far as the
//! repository says: constructor calls passed as arguments bound to the repository classes they
//! build, arguments that pass on a parameter of the enclosing class's `__init__` given the
//! value that class is built with (up to [`PASS_DEPTH`] classes up; inside such constructor
//! calls too: `PreNorm(dim, LinearAttention(dim))`), and the calls of a
//! class-valued parameter (`downsample(input_resolution, dim=dim)` in `BasicLayer.__init__`)
//! that a call site binds to the class (`BasicLayer(..., downsample=PatchMerging)`) or whose
//! default it is (`def __init__(self, ..., block_fn=Block)`).

use std::collections::HashMap;

use crate::calls::{CallSite, Ctor};
use crate::closure::NodeId;
use crate::guess;
use crate::index::ParamKind;
use crate::resolve::{Found, Repo};

/// Where a repository uses classes as values, by class name (the bare name as the using file
/// writes it), so that finding a class's calls through class-valued parameters reads only
/// the places that name it.
#[derive(Debug, Default)]
pub(crate) struct ClassUses {
    /// Each argument that passes the class uncalled: (file, call, argument) indexes.
    passed: HashMap<String, Vec<(usize, usize, usize)>>,
    /// Each call of an `__init__` parameter whose default names the class: (file, call).
    defaulted: HashMap<String, Vec<(usize, usize)>>,
}

impl ClassUses {
    /// The uses of every file of `repo`.
    pub(crate) fn build(repo: &Repo) -> ClassUses {
        let mut uses = ClassUses::default();
        for (fi, file) in repo.files.iter().enumerate() {
            for (ci, call) in file.calls.iter().enumerate() {
                if call.param {
                    let default = repo
                        .own_init_params(fi, call.stmt)
                        .and_then(|ps| ps.iter().find(|p| p.name == call.callee))
                        .and_then(|p| p.default.as_deref());
                    if let Some(default) = default {
                        let name = default.trim().to_string();
                        uses.defaulted.entry(name).or_default().push((fi, ci));
                    }
                    continue;
                }
                for (ai, arg) in call.args.iter().enumerate() {
                    for name in &arg.classes {
                        uses.passed
                            .entry(name.clone())
                            .or_default()
                            .push((fi, ci, ai));
                    }
                }
            }
        }
        uses
    }
}

/// The calls that build the class at `node`, with their paths, resolved (see the module's
/// documentation).
pub(crate) fn resolved(repo: &Repo, node: NodeId) -> Vec<(String, CallSite)> {
    resolved_sites(repo, node, PASS_DEPTH)
}

/// Resolves the class of a constructor call passed as an argument (and of those among its
/// own arguments) as seen from statement `stmt` of file `fi`; false when one is neither an
/// `nn.Module` class nor a configuration class ([`Repo::is_config_class`]) of the repository.
fn resolve_ctor(repo: &Repo, fi: usize, stmt: usize, ctor: &mut Ctor) -> bool {
    let class = match repo.lookup(fi, stmt, &ctor.callee, false) {
        Found::Def { file, stmt: s, .. } => (file, s),
        Found::Itself => (fi, stmt),
        _ => return false,
    };
    if !repo.is_nn_module(class.0, class.1) && !repo.is_config_class(class.0, class.1) {
        return false;
    }
    ctor.class = Some(class);
    ctor.args.iter_mut().all(|a| {
        a.ctor
            .as_mut()
            .is_none_or(|c| resolve_ctor(repo, fi, stmt, c))
    })
}

/// How many enclosing classes up an argument passed on from an `__init__`'s parameter is
/// followed (`Block(dim)` in `Stage.__init__(self, dim)`, `Stage(dim=96)` in `Net.__init__`).
const PASS_DEPTH: u32 = 3;

/// The repository's calls that build the class at `node`, with their paths; an argument that
/// passes on a parameter of the enclosing class's `__init__` gets the value that class is built
/// with (from its own call sites, `depth` classes up at most), where that value is not a guess.
/// The calls of a class-valued parameter that a call site binds to the class count too
/// ([`class_param_sites`]).
fn resolved_sites(repo: &Repo, node: NodeId, depth: u32) -> Vec<(String, CallSite)> {
    let mut out: Vec<(String, CallSite)> = repo
        .call_sites(node)
        .into_iter()
        .map(|(fi, site)| {
            let path = repo.files[fi].path.clone();
            (path, resolved_site(repo, fi, site, node, depth))
        })
        .collect();
    if depth > 0 {
        out.extend(class_param_sites(repo, node, depth));
        out.extend(default_param_sites(repo, node, depth));
    }
    out
}

/// `site` (in file `fi`) with the classes of its constructor-call arguments resolved, and those
/// that build no repository `nn.Module` class made unknown.
fn with_ctors(repo: &Repo, fi: usize, site: &CallSite) -> CallSite {
    let mut site = site.clone();
    for arg in &mut site.args {
        if let Some(ctor) = arg.ctor.as_mut()
            && !resolve_ctor(repo, fi, site.stmt, ctor)
        {
            arg.forget_ctor();
        }
    }
    site
}

/// Whether an argument of `site` passes on a parameter of the enclosing `__init__` whose value
/// is not known yet, itself or inside a constructor call ([`crate::calls::CallArg::waits`]).
fn passes_unknown(site: &CallSite) -> bool {
    site.args.iter().any(|a| a.waits())
}

/// Gives the arguments of `site` (in file `fi`) that pass on a parameter of the enclosing
/// class's `__init__` the values `outer` (a call site of that class, with its path) builds the
/// class with, where they are not guesses; so too the arguments of the constructor calls it
/// passes (`PreNorm(dim, LinearAttention(dim))`), whose value is then the call once every
/// argument of it is known (the provenance lists the parameters it took, in order).
fn fill_passed(repo: &Repo, fi: usize, site: &mut CallSite, outer: Option<(&str, &CallSite)>) {
    let Some(outer_name) = repo.class_name_at(fi, site.stmt) else {
        return;
    };
    let facts = repo.class_facts(fi, site.stmt);
    let known = guess::sited_init_args(&facts, outer);
    for arg in site.args.iter_mut().filter(|a| a.value.is_none()) {
        if let Some(p) = &arg.passes {
            if let Some(a) = known.iter().find(|a| &a.name == p && !a.guessed) {
                arg.value = Some(a.value.clone());
                arg.via = Some(format!("{p} of {outer_name}: {}", a.source));
                arg.ctor = a.ctor.clone();
            }
        } else if let Some(ctor) = arg.ctor.as_mut() {
            let mut vias = Vec::new();
            if fill_ctor(ctor, &known, outer_name, &mut vias) {
                arg.value = Some(ctor.render(&|c| c.callee.clone()));
                arg.via = Some(vias.join("; "));
            }
        }
    }
}

/// Gives the arguments of `ctor` (a constructor call in the `__init__` of the class
/// `outer_name`), and those of the constructor calls among them, that pass on a parameter of
/// that `__init__` its value in `known`, where it is not a guess; each parameter taken is added
/// to `vias` once (`dim of Stage: call path:line`). True when every argument is then known.
fn fill_ctor(
    ctor: &mut Ctor,
    known: &[guess::InitArg],
    outer_name: &str,
    vias: &mut Vec<String>,
) -> bool {
    for arg in ctor.args.iter_mut().filter(|a| a.value.is_none()) {
        if let Some(p) = &arg.passes {
            if let Some(a) = known.iter().find(|a| &a.name == p && !a.guessed) {
                arg.value = Some(a.value.clone());
                arg.ctor = a.ctor.clone();
                let via = format!("{p} of {outer_name}: {}", a.source);
                if !vias.contains(&via) {
                    vias.push(via);
                }
            }
        } else if let Some(inner) = arg.ctor.as_mut()
            && fill_ctor(inner, known, outer_name, vias)
        {
            arg.value = Some(inner.render(&|c| c.callee.clone()));
        }
    }
    ctor.complete()
}

/// The calls that build the class at `node` through a class-valued parameter: a call site of a
/// class `A` passes the class for a parameter `p` of `A.__init__` (`BasicLayer(...,
/// downsample=PatchMerging if last else None)`), and `A.__init__` calls `p(...)`. Each is that
/// inner call, its arguments that pass on `A`'s parameters given the values of that call site
/// of `A` (itself resolved `depth - 1` classes up), with the binding in `through`.
fn class_param_sites(repo: &Repo, node: NodeId, depth: u32) -> Vec<(String, CallSite)> {
    let Some(name) = repo.class_name_at(node.0, node.1) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &(ofi, ci, arg_at) in repo.class_uses().passed.get(name).into_iter().flatten() {
        let outer = &repo.files[ofi].calls[ci];
        if passes_class(repo, ofi, outer.stmt, name, node) {
            out.extend(bound_calls(repo, ofi, outer, arg_at, depth));
        }
    }
    out
}

/// The calls of the class-valued parameter that argument `arg_at` of `outer` (a call site in
/// file `ofi`) binds, in the `__init__` of the class `outer` builds, resolved through `outer`.
fn bound_calls(
    repo: &Repo,
    ofi: usize,
    outer: &CallSite,
    arg_at: usize,
    depth: u32,
) -> Vec<(String, CallSite)> {
    let Some(built) = repo.built_class(ofi, outer) else {
        return Vec::new();
    };
    let (Some(param), Some(built_name)) = (
        bound_param(repo, built, outer, arg_at),
        repo.class_name_at(built.0, built.1),
    ) else {
        return Vec::new();
    };
    let at = if ofi == built.0 {
        format!(":{}", outer.line)
    } else {
        format!("{}:{}", repo.files[ofi].path, outer.line)
    };
    let mut resolved_outer: Option<CallSite> = None;
    repo.files[built.0]
        .calls
        .iter()
        .filter(|c| c.param && c.stmt == built.1 && c.callee == param)
        .map(|inner| {
            let mut site = with_ctors(repo, built.0, inner);
            site.through = Some(format!("{param}= of {built_name} at {at}"));
            if passes_unknown(&site) {
                let outer_site = resolved_outer
                    .get_or_insert_with(|| resolved_site(repo, ofi, outer, built, depth - 1));
                let outer_path = repo.files[ofi].path.as_str();
                fill_passed(repo, built.0, &mut site, Some((outer_path, outer_site)));
            }
            (repo.files[built.0].path.clone(), site)
        })
        .collect()
}

/// The calls of a class-valued parameter whose default is the class at `node` (`block_fn(dim=
/// embed_dim)` in `VisionTransformer.__init__(self, ..., block_fn=Block)`): each builds the
/// class whenever the enclosing class is built without that parameter, so its arguments that
/// pass on the enclosing class's parameters take the values of the best call site of that class
/// that does not set it (resolved `depth - 1` classes up).
fn default_param_sites(repo: &Repo, node: NodeId, depth: u32) -> Vec<(String, CallSite)> {
    let Some(name) = repo.class_name_at(node.0, node.1) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &(fi, ci) in repo.class_uses().defaulted.get(name).into_iter().flatten() {
        let inner = &repo.files[fi].calls[ci];
        let class = (fi, inner.stmt);
        if class == node || !passes_class(repo, fi, inner.stmt, name, node) {
            continue;
        }
        let Some(class_name) = repo.class_name_at(fi, inner.stmt) else {
            continue;
        };
        let param = inner.callee.as_str();
        let mut site = with_ctors(repo, fi, inner);
        site.through = Some(format!("{param}={name}, a default of {class_name}"));
        if passes_unknown(&site) {
            let up: Vec<(String, CallSite)> = resolved_sites(repo, class, depth - 1)
                .into_iter()
                .filter(|(_, s)| !binds(repo, class, s, param))
                .collect();
            fill_passed(repo, fi, &mut site, best(&up));
        }
        out.push((repo.files[fi].path.clone(), site));
    }
    out
}

/// Whether `site`, a call building the class at `class`, sets its parameter `param`.
fn binds(repo: &Repo, class: NodeId, site: &CallSite, param: &str) -> bool {
    (0..site.args.len()).any(|i| bound_param(repo, class, site, i).as_deref() == Some(param))
}

/// Whether the name `class`, read by statement `stmt` of file `fi`, is the class at `node`.
fn passes_class(repo: &Repo, fi: usize, stmt: usize, class: &str, node: NodeId) -> bool {
    match repo.lookup(fi, stmt, class, false) {
        Found::Def { file, stmt: s, .. } => (file, s) == node,
        Found::Itself => (fi, stmt) == node,
        _ => false,
    }
}

/// The parameter of the `__init__` of the class at `class` that argument `arg_at` of `site`
/// (a call building that class) binds, by keyword or by position.
fn bound_param(repo: &Repo, class: NodeId, site: &CallSite, arg_at: usize) -> Option<String> {
    let facts = repo.class_facts(class.0, class.1);
    let params = &facts.init.as_ref()?.params;
    let arg = site.args.get(arg_at)?;
    match &arg.keyword {
        Some(k) => params.iter().find(|p| &p.name == k).map(|p| p.name.clone()),
        None => {
            let position = site.args[..arg_at]
                .iter()
                .filter(|a| a.keyword.is_none())
                .count();
            params
                .iter()
                .filter(|p| p.kind == ParamKind::Positional)
                .nth(position)
                .map(|p| p.name.clone())
        }
    }
}

/// `site` (in file `fi`, a call building the class at `built`) with its constructor calls
/// resolved, and its arguments that pass on a parameter of the enclosing class's `__init__`
/// given the values of that class's best call site, `depth` classes up at most.
fn resolved_site(repo: &Repo, fi: usize, site: &CallSite, built: NodeId, depth: u32) -> CallSite {
    let mut site = with_ctors(repo, fi, site);
    let enclosing = (fi, site.stmt);
    if depth > 0 && enclosing != built && passes_unknown(&site) {
        let up = resolved_sites(repo, enclosing, depth - 1);
        fill_passed(repo, fi, &mut site, best(&up));
    }
    site
}

/// The call site whose arguments build the class: the one with the most known values, then
/// one outside tests, then the first by (path, line).
pub(crate) fn best(sites: &[(String, CallSite)]) -> Option<(&str, &CallSite)> {
    sites
        .iter()
        .map(|(path, site)| (path.as_str(), site))
        .filter(|(_, site)| site.args.iter().any(|a| a.value.is_some()))
        .min_by_key(|(path, site)| {
            let known = site.args.iter().filter(|a| a.value.is_some()).count();
            let test = path.contains("test");
            (std::cmp::Reverse(known), test, *path, site.line)
        })
}
