fn main() {
    println!("softswitch: under construction");
}
