//! Prints the tree-sitter tree of a file (debugging aid).
fn main() {
    let path = std::env::args().nth(1).expect("path");
    let src = std::fs::read_to_string(path).expect("read");
    let mut p = tree_sitter::Parser::new();
    p.set_language(&tree_sitter_python::LANGUAGE.into())
        .expect("lang");
    let t = p.parse(&src, None).expect("tree");
    let root = t.root_node();
    let mut c = root.walk();
    for n in root.children(&mut c) {
        println!("{} {:?} {}", n.kind(), n.start_position(), n.to_sexp());
    }
}
