//! tree-sitter-python plumbing: the parser, node kind and field ids, text and error helpers.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tree_sitter::{Language, Node, ParseOptions, Parser, Tree};

/// Node kind and field ids of tree-sitter-python, looked up once.
///
/// Comparing `kind_id()` with these is much cheaper than comparing kind strings.
pub(crate) struct Kinds {
    pub(crate) module: u16,
    pub(crate) identifier: u16,
    pub(crate) attribute: u16,
    pub(crate) call: u16,
    pub(crate) class_definition: u16,
    pub(crate) function_definition: u16,
    pub(crate) decorated_definition: u16,
    pub(crate) decorator: u16,
    pub(crate) import_statement: u16,
    pub(crate) import_from_statement: u16,
    pub(crate) future_import_statement: u16,
    pub(crate) aliased_import: u16,
    pub(crate) dotted_name: u16,
    pub(crate) relative_import: u16,
    pub(crate) import_prefix: u16,
    pub(crate) wildcard_import: u16,
    pub(crate) expression_statement: u16,
    pub(crate) assignment: u16,
    pub(crate) augmented_assignment: u16,
    pub(crate) if_statement: u16,
    pub(crate) for_statement: u16,
    pub(crate) with_item: u16,
    pub(crate) as_pattern: u16,
    pub(crate) as_pattern_target: u16,
    pub(crate) except_clause: u16,
    pub(crate) global_statement: u16,
    pub(crate) nonlocal_statement: u16,
    pub(crate) delete_statement: u16,
    pub(crate) lambda: u16,
    pub(crate) list_comprehension: u16,
    pub(crate) set_comprehension: u16,
    pub(crate) dictionary_comprehension: u16,
    pub(crate) generator_expression: u16,
    pub(crate) for_in_clause: u16,
    pub(crate) named_expression: u16,
    pub(crate) keyword_argument: u16,
    pub(crate) default_parameter: u16,
    pub(crate) typed_parameter: u16,
    pub(crate) typed_default_parameter: u16,
    pub(crate) list_splat_pattern: u16,
    pub(crate) dictionary_splat_pattern: u16,
    pub(crate) keyword_separator: u16,
    pub(crate) pattern_list: u16,
    pub(crate) tuple_pattern: u16,
    pub(crate) list_pattern: u16,
    pub(crate) tuple: u16,
    pub(crate) list: u16,
    pub(crate) parenthesized_expression: u16,
    pub(crate) list_splat: u16,
    pub(crate) member_type: u16,
    pub(crate) case_pattern: u16,
    pub(crate) comment: u16,
    pub(crate) print_statement: u16,
    pub(crate) exec_statement: u16,
    pub(crate) string: u16,
    pub(crate) raise_statement: u16,
    pub(crate) try_statement: u16,
    pub(crate) subscript: u16,
    pub(crate) generic_type: u16,
    pub(crate) yield_expression: u16,
    pub(crate) return_statement: u16,
    pub(crate) break_statement: u16,
    pub(crate) continue_statement: u16,
    pub(crate) expression_list: u16,
    pub(crate) while_statement: u16,
    pub(crate) else_clause: u16,
    pub(crate) elif_clause: u16,
    pub(crate) finally_clause: u16,
    pub(crate) case_clause: u16,
    pub(crate) lambda_parameters: u16,
    pub(crate) parameters: u16,
    pub(crate) argument_list: u16,
    pub(crate) dictionary_splat: u16,
    pub(crate) integer: u16,
    pub(crate) comparison_operator: u16,
    pub(crate) block: u16,
    pub(crate) f_name: u16,
    pub(crate) f_alias: u16,
    pub(crate) f_value: u16,
    pub(crate) f_left: u16,
    pub(crate) f_right: u16,
    pub(crate) f_type: u16,
    pub(crate) f_body: u16,
    pub(crate) f_object: u16,
    pub(crate) f_attribute: u16,
    pub(crate) f_parameters: u16,
    pub(crate) f_function: u16,
    pub(crate) f_arguments: u16,
    pub(crate) f_return_type: u16,
    pub(crate) f_superclasses: u16,
    pub(crate) f_definition: u16,
    pub(crate) f_module_name: u16,
    pub(crate) f_condition: u16,
    pub(crate) f_consequence: u16,
}

/// The tree-sitter-python language.
pub(crate) fn language() -> Language {
    tree_sitter_python::LANGUAGE.into()
}

impl Kinds {
    /// The ids, computed on first use.
    pub(crate) fn get() -> &'static Kinds {
        static KINDS: OnceLock<Kinds> = OnceLock::new();
        KINDS.get_or_init(|| Kinds::new(&language()))
    }

    fn new(lang: &Language) -> Kinds {
        let k = |name: &str| lang.id_for_node_kind(name, true);
        let anon = |name: &str| lang.id_for_node_kind(name, false);
        let f = |name: &str| {
            lang.field_id_for_name(name)
                .unwrap_or_else(|| panic!("tree-sitter-python has no field `{name}`"))
                .get()
        };
        Kinds {
            module: k("module"),
            identifier: k("identifier"),
            attribute: k("attribute"),
            call: k("call"),
            class_definition: k("class_definition"),
            function_definition: k("function_definition"),
            decorated_definition: k("decorated_definition"),
            decorator: k("decorator"),
            import_statement: k("import_statement"),
            import_from_statement: k("import_from_statement"),
            future_import_statement: k("future_import_statement"),
            aliased_import: k("aliased_import"),
            dotted_name: k("dotted_name"),
            relative_import: k("relative_import"),
            import_prefix: k("import_prefix"),
            wildcard_import: k("wildcard_import"),
            expression_statement: k("expression_statement"),
            assignment: k("assignment"),
            augmented_assignment: k("augmented_assignment"),
            if_statement: k("if_statement"),
            for_statement: k("for_statement"),
            with_item: k("with_item"),
            as_pattern: k("as_pattern"),
            as_pattern_target: k("as_pattern_target"),
            except_clause: k("except_clause"),
            global_statement: k("global_statement"),
            nonlocal_statement: k("nonlocal_statement"),
            delete_statement: k("delete_statement"),
            lambda: k("lambda"),
            list_comprehension: k("list_comprehension"),
            set_comprehension: k("set_comprehension"),
            dictionary_comprehension: k("dictionary_comprehension"),
            generator_expression: k("generator_expression"),
            for_in_clause: k("for_in_clause"),
            named_expression: k("named_expression"),
            keyword_argument: k("keyword_argument"),
            default_parameter: k("default_parameter"),
            typed_parameter: k("typed_parameter"),
            typed_default_parameter: k("typed_default_parameter"),
            list_splat_pattern: k("list_splat_pattern"),
            dictionary_splat_pattern: k("dictionary_splat_pattern"),
            keyword_separator: k("keyword_separator"),
            pattern_list: k("pattern_list"),
            tuple_pattern: k("tuple_pattern"),
            list_pattern: k("list_pattern"),
            tuple: k("tuple"),
            list: k("list"),
            parenthesized_expression: k("parenthesized_expression"),
            list_splat: k("list_splat"),
            member_type: k("member_type"),
            case_pattern: k("case_pattern"),
            comment: k("comment"),
            print_statement: k("print_statement"),
            exec_statement: k("exec_statement"),
            string: k("string"),
            raise_statement: k("raise_statement"),
            try_statement: k("try_statement"),
            subscript: k("subscript"),
            generic_type: k("generic_type"),
            yield_expression: k("yield"),
            return_statement: k("return_statement"),
            break_statement: k("break_statement"),
            continue_statement: k("continue_statement"),
            expression_list: k("expression_list"),
            while_statement: k("while_statement"),
            else_clause: k("else_clause"),
            elif_clause: k("elif_clause"),
            finally_clause: k("finally_clause"),
            case_clause: k("case_clause"),
            lambda_parameters: k("lambda_parameters"),
            parameters: k("parameters"),
            argument_list: k("argument_list"),
            dictionary_splat: k("dictionary_splat"),
            integer: k("integer"),
            comparison_operator: k("comparison_operator"),
            block: k("block"),
            f_name: f("name"),
            f_alias: f("alias"),
            f_value: f("value"),
            f_left: f("left"),
            f_right: f("right"),
            f_type: f("type"),
            f_body: f("body"),
            f_object: f("object"),
            f_attribute: f("attribute"),
            f_parameters: f("parameters"),
            f_function: f("function"),
            f_arguments: f("arguments"),
            f_return_type: f("return_type"),
            f_superclasses: f("superclasses"),
            f_definition: f("definition"),
            f_module_name: f("module_name"),
            f_condition: f("condition"),
            f_consequence: f("consequence"),
        }
        .checked(anon)
    }

    fn checked(self, anon: impl Fn(&str) -> u16) -> Kinds {
        // `id_for_node_kind` answers 0 for an unknown kind; every kind above must exist.
        debug_assert!(anon("import") != 0);
        for (name, id) in [
            ("module", self.module),
            ("identifier", self.identifier),
            ("class_definition", self.class_definition),
            ("as_pattern_target", self.as_pattern_target),
            ("keyword_separator", self.keyword_separator),
        ] {
            assert!(id != 0, "tree-sitter-python has no node kind `{name}`");
        }
        self
    }
}

/// Why a file could not be parsed at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseFailure {
    /// The parser ran past its time budget.
    Timeout,
    /// The parser returned no tree.
    NoTree,
}

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parses `source` with this thread's parser (one `Parser` per thread, created on first use).
pub(crate) fn parse(source: &str, budget: Duration) -> Result<Tree, ParseFailure> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let parser = match slot.as_mut() {
            Some(p) => p,
            None => {
                let mut p = Parser::new();
                p.set_language(&language())
                    .map_err(|_| ParseFailure::NoTree)?;
                slot.insert(p)
            }
        };
        let bytes = source.as_bytes();
        let started = Instant::now();
        let mut timed_out = false;
        let mut progress = |_: &tree_sitter::ParseState| {
            if started.elapsed() > budget {
                timed_out = true;
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let options = ParseOptions::new().progress_callback(&mut progress);
        let mut read = |offset: usize, _| bytes.get(offset..).unwrap_or_default();
        let tree = parser.parse_with_options(&mut read, None, Some(options));
        match tree {
            Some(tree) => Ok(tree),
            None => {
                parser.reset();
                if timed_out {
                    Err(ParseFailure::Timeout)
                } else {
                    Err(ParseFailure::NoTree)
                }
            }
        }
    })
}

/// The source text of a node (empty when the range is not on character boundaries).
pub(crate) fn text<'s>(src: &'s str, node: Node<'_>) -> &'s str {
    src.get(node.start_byte()..node.end_byte()).unwrap_or("")
}

/// 1-based line of the first syntax error (an ERROR or MISSING node) under `node`, if any.
pub(crate) fn first_error_line(node: Node<'_>) -> Option<u32> {
    if !node.has_error() {
        return None;
    }
    let mut current = node;
    'descend: loop {
        if current.is_error() || current.is_missing() {
            return Some(current.start_position().row as u32 + 1);
        }
        let mut cursor = current.walk();
        for child in current.children(&mut cursor) {
            if child.has_error() {
                current = child;
                continue 'descend;
            }
        }
        // `has_error` was set but no child carries it: the node itself is the error.
        return Some(current.start_position().row as u32 + 1);
    }
}
