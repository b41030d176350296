fn main() {
    println!("shortener");
}
