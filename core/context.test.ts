import { expect } from 'chai';
import { ClientLink, ServingList } from './context.js';

describe('ServingList: the requests being served, threaded through their client links', () => {
  it('adds and removes in any order (twice is nothing), and stopAll tells only those still in it', () => {
    const list = new ServingList();
    const links = [new ClientLink(), new ClientLink(), new ClientLink(), new ClientLink()];
    const told: number[] = [];
    links.forEach((link, i) => {
      link.watch(() => told.push(i));
      list.add(link);
    });
    list.delete(links[1]!);
    list.delete(links[3]!); // the head
    list.delete(links[3]!);
    list.delete(new ClientLink()); // never added
    list.stopAll();
    expect(told.sort()).to.deep.equal([0, 2]);
    expect([links[0]!.stopped, links[0]!.gone, links[1]!.stopped]).to.deep.equal([true, false, false]);
    // A link stopped tells a watcher added later at once; one that left is not stopped by it.
    let late = false;
    links[0]!.watch(() => (late = true));
    expect(late).to.equal(true);
    links[1]!.leave();
    list.add(links[1]!);
    list.stopAll();
    expect(links[1]!.stopped).to.equal(false);
  });
});
